"""A metric written outside the package: TieLean's slot gap, in one record.

TieLean with the minority-coded candidate in slot A minus TieLean with it in slot B (AMB items without
pressure; 0 pp is even-handed). Built from two existing indicator columns (``tl_A``, ``tl_B``), so one
:class:`~evenhand.vocab.metric_defs.Metric` is the whole extension: ``evenhand --plugin
examples/slot_gap_metric.py score FILE`` then scores, labels and prints it like a shipped metric.
"""
from __future__ import annotations

from evenhand.vocab.metric_defs import Metric, register_metric

SLOT_GAP = register_metric(Metric(
    "tl_slot_gap", "diff", ("tl_A", "tl_B"), "TieLean slot gap", unit="pp", fair=0.0, asymmetry=True,
    by_degree=True, cli_row=True, pooled=True, row_label="TieLean slot gap (A - B)",
    positive="on ties, the minority-coded candidate is favoured more when it sits in slot A",
    negative="on ties, the minority-coded candidate is favoured more when it sits in slot B",
    description="TieLean with the minority in slot A minus with it in slot B"))
