"""The Intervention protocol, its registry and the nine debiasing methods.

Empty until the interventions issue lands: this package holds only what exists."""
