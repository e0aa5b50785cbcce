"""The reporting floor: tables and figures of finished runs, each a pure function of saved tables.

- ``figures``: paper figures and their long tables; ``tables``: LaTeX tables; ``plotting``: the one paper style
  and saving; ``labels``: the label vocabulary of every figure and table.
- ``multirun``: several runs side by side (``runs_table``, ``RunsTable``; ``eh.table``).
"""
