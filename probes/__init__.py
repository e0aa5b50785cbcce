"""Linear probes on cached activations (per-layer sweeps, controls, name ablation, text baseline).

Empty until the probes issue lands: this package holds only what exists."""
