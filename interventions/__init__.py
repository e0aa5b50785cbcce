"""The Intervention protocol, its registry and the nine debiasing methods."""
