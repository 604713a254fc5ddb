"""Text tables for the terminal (pandas formats them)."""

from __future__ import annotations

from quantgate.schema.sensitivity import SensitivityFile
from quantgate.sensitivity.budget import human
from quantgate.sensitivity.recommend import Recommendation


def sensitivity_frame(sens: SensitivityFile):
    import pandas as pd

    t = sens.table()
    rows = []
    for g in sens.groups:
        row = {"group": g.name, "kind": g.kind, "bf16": human(g.bf16_bytes)}
        for f in sens.formats:
            m = t[(g.name, f)]
            row[f"{f} KL"] = f"{m.kl_mean:.2e}"
            row[f"{f} size"] = human(m.bytes)
        rows.append(row)
    return pd.DataFrame(rows)


def format_table(sens: SensitivityFile) -> str:
    df = sensitivity_frame(sens)
    return (df.to_string(index=False) + f"\nKL: nats per token against BF16, each group quantized alone; the rest of "
            f"the model ({human(sens.sizes.fixed_bytes)}) stays as it is; BF16 total {human(sens.sizes.bf16_bytes)}")


def format_choice(rec: Recommendation) -> str:
    import pandas as pd

    df = pd.DataFrame([{"group": c.group, "format": c.format, "KL": f"{c.kl:.2e}", "size": human(c.bytes),
                        "why": c.why} for c in rec.choices])
    left = {c: (lambda w: lambda v: str(v).ljust(w))(int(df[c].astype(str).str.len().max())) for c in ("group", "why")}
    lines = [df.to_string(index=False, justify="left", formatters=left), "",
             f"weights {human(rec.total_bytes)} (BF16 {human(rec.bf16_bytes)}, smallest {human(rec.min_bytes)}); "
             f"{rec.effective_bits:.2f} bits/weight; predicted damage (sum of KL) {rec.predicted_kl:.3e}; "
             f"decode {rec.modelled_speedup:.2f}x BF16 ({rec.speed_basis})"]
    lines += [f"note: {n}" for n in rec.notes]
    return "\n".join(lines)
