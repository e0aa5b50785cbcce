"""Directions in activation space and the hooks that apply them.

- :mod:`steering.directions`: concept directions from activations (difference of means,
  paired PCA, logistic probe) and the seeded random control of the same norm;
- :mod:`steering.hooks`: hidden-state edits (``Add``, ``ProjectOut``, ``Affine``) and the
  ``steer`` context manager that applies them at named model sites, also during generation;
- :mod:`steering.leace`: LEACE closed-form linear concept erasure (Belrose et al. 2023).
"""
