"""Study configs and the runner that turns a config into a run."""
