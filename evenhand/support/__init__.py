"""The support floor: small utilities every floor may use; nothing in the core above it.

- ``registry``: the one registry idiom (``Registry``, ``load_plugin``) for engines, studies, interventions,
  metrics and figures; ``options``: YAML -> frozen dataclasses; ``messages``: the messages for faults a user
  meets; ``lazy``: lazy package exports (PEP 562).
"""
