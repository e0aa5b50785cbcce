"""The running floor: what a run does to a model, each step resumable.

- ``decisions``: items x model -> response rows (``decide``, ``DecideOptions``), in answer, reasoning and
  log-prob modes.
- ``activations``: the residual-stream cache at the decision point (``cache_activations``, ``CacheOptions``,
  ``ActivationCache``), read through :mod:`evenhand.engine.reader`.
- ``stages``: the stage driver every study runs through (``run_stages``, ``Stage``).
- ``shards``: append-only shard directories for long runs; ``itemlog``: per-item logs (``evenhand show``).
"""
