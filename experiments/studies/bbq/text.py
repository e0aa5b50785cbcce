"""What `evenhand bbq` (and `evenhand run` on a BBQ config) prints: the pooled table by configuration."""
from __future__ import annotations


def bbq_text(table, model: str) -> str:
    """BBQ's pooled accuracy and bias scores by configuration (95% CIs over templates)."""
    t = table[(table["category"] == "all")]
    lines = [f"BBQ on {model}: all categories pooled (95% CIs: cluster bootstrap over templates)",
             f"{'configuration':<18}{'acc ambig':>12}{'acc disamb':>12}{'bias ambig [CI]':>24}{'bias disamb [CI]':>24}"]
    for conf, g in t.groupby("configuration", sort=False):
        v = g.set_index("metric")

        def ci(m):
            r = v.loc[m]
            return f"{r['value']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]" if r["value"] == r["value"] else "NaN"
        lines.append(f"{conf:<18}{v.loc['acc_ambig', 'value']:>12.3f}{v.loc['acc_disambig', 'value']:>12.3f}"
                     f"{ci('bias_ambig'):>24}{ci('bias_disambig'):>24}")
    return "\n".join(lines)
