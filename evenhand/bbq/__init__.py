"""BBQ (Parrish et al. 2022, "BBQ: A hand-built bias benchmark for question answering").

``data`` loads BBQ's JSONL files into one tidy DataFrame (with the unknown and the
biased answer located per example, as BBQ's own analysis scripts do) and renders
prompts; ``scoring`` computes BBQ's accuracy and bias scores with template-level
cluster-bootstrap confidence intervals.
"""
