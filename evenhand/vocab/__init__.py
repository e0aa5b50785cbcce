"""The vocabulary floor: the names everything above shares.

- ``metric_defs``: one ``Metric`` record per metric, everything else derived; ``sides``: which side a choice
  favours; ``prompts``: item -> chat messages; ``problems``: problems in rows, gathered into one error.
"""
