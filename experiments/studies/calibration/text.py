"""What `evenhand run` on a calibration config (and `evenhand organism calibrate`) prints: one line per beta."""
from __future__ import annotations


def calibration_text(curve: dict) -> str:
    """One line per beta: FragGap at the curve's degree (with its CI), TieShift, AccGap, GT accuracy and the gain."""
    lines, k = [], curve.get("degree", 3)
    for p in curve["points"]:
        f = p["fraggap"]
        ci = "" if f["ci_low"] is None else f" [{100 * f['ci_low']:+.1f}, {100 * f['ci_high']:+.1f}]"
        lines.append(f"beta {p['beta']:>6g}: FragGap({k}) {100 * f['value']:+6.1f} pp{ci}  "
                     f"TieShift({k}) {100 * p['tieshift']['value']:+6.1f} pp  "
                     f"AccGap({k}) {100 * p['accgap']['value']:+5.1f} pp  GT acc {p['accuracy']['value']:.3f}  "
                     f"gain {p['gain'] if p['gain'] is None else round(p['gain'], 3)}")
    return "\n".join(lines)
