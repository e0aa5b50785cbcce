"""What `evenhand modes` prints: the answer-mode vs logprob-mode comparison, one line per metric."""
from __future__ import annotations


def modes_text(table, model: str, n_items: int) -> str:
    """The answer-mode vs logprob-mode comparison, one line per metric."""
    lines = [f"{model}: {n_items:,} items decided in answer and logprob mode (95% CIs; difference paired)"]
    for metric, g in table.groupby("metric", sort=False):
        parts = []
        for r in g.itertuples():
            v = "NaN" if r.value is None or r.value != r.value else f"{100 * r.value:+.1f}"
            ci = "" if r.ci_low is None or r.ci_low != r.ci_low else f" [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
            parts.append(f"{r.stat} {v}{ci}")
        lines.append(f"  {metric:<9} " + "; ".join(parts))
    lines.append(f"  TieLean on opposite sides of 0.5 (CIs excluding it): {'yes' if table.attrs['flips'] else 'no'}")
    return "\n".join(lines)
