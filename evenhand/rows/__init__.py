"""The rows floor: the response table scoring reads, and the importers that produce it.

- ``schema``: the row schema and its loader (``validate_rows``, ``load_rows``,
  ``RowError``; ``read_rows`` is :mod:`evenhand.files.rowfiles`'s).
- ``fairstress``: the released FairStress rows mapped onto the schema (``load_fairstress``), with
  ``fairstress_groups`` for their group strings; ``conventions``: EvenHand's and Ai2's scoring conventions.
"""
