"""The bias dial's calibration figure: FragGap and TieShift at the curve's degree (with CIs) against beta."""
from __future__ import annotations

from pathlib import Path
from evenhand.reporting.labels import metric_name
from evenhand.reporting.plotting import COLUMN_WIDTH, paper_style, save


def calibration_figure(curve: dict, stem: str | Path, formats=("png",)) -> list[Path]:
    """Plot a :func:`~organism.calibration.calibrate` result: FragGap and TieShift at
    its degree (3, or the mechanism's eval degree; pp, 95% CI bars; none where a point has no CI, e.g. one scenario) by beta; writes
    ``stem.<fmt>`` and returns the paths."""
    import matplotlib.pyplot as plt

    from evenhand.reporting.labels import MINORITY_SIDE
    colours = paper_style()
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 2.2))
    pts = sorted(curve["points"], key=lambda p: p["beta"])
    betas = [p["beta"] for p in pts]
    for k, metric in enumerate(("fraggap", "tieshift")):
        val = [100 * p[metric]["value"] for p in pts]
        lo = [0.0 if p[metric]["ci_low"] is None else 100 * (p[metric]["value"] - p[metric]["ci_low"]) for p in pts]
        hi = [0.0 if p[metric]["ci_high"] is None else 100 * (p[metric]["ci_high"] - p[metric]["value"]) for p in pts]
        ax.errorbar(betas, val, yerr=[lo, hi], marker="o", capsize=2, color=colours[k], label=metric_name(metric))
    ax.axhline(0, color="0.6", linewidth=0.6)
    ax.set_xlabel("Dial strength β")
    ax.set_ylabel(f"Gap at D{curve.get('degree', 3)} (pp)\n+ = {MINORITY_SIDE}")
    size = f"n = {curve['n_items']:,} items, " if curve.get("n_items") else ""
    mech = f" ({curve['mechanism']})" if curve.get("mechanism") else ""
    ax.set_title(f"Bias dial{mech} on the fair organism\n{size}{curve['n_scenarios']} held-out scenarios")
    ax.legend(frameon=False, loc="upper left")
    return save(fig, stem, formats)
