"""Linear probes on cached activations (per-layer sweeps, controls, name ablation, text baseline)."""
