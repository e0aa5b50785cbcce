"""Study configs and the runner that turns a config into a run.

Empty until the models and experiments issues land: this package holds only what exists."""
