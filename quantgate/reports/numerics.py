"""The numerics table report.md and report.html print: per variant and quantized format, what its server computed."""

from __future__ import annotations

from quantgate.schema.summary import Summary


def numerics_rows(r: Summary) -> list[dict[str, str]]:
    """One row per variant and quantized format: what the backend computed (weights-only or
    weights+activations) and on what evidence — the table report.md and report.html print."""
    rows = []
    for v in r.variants:
        n = v.numerics
        if n is None:
            rows.append({"variant": v.name, "backend": "–", "format": "–", "computes": "not recorded",
                         "activations": "–", "evidence": "run.json has no numerics (an endpoint's model, or an "
                                                         "older run)"})
            continue
        where = f"{n.backend} ({n.device})" if n.device else n.backend
        if not n.formats:
            rows.append({"variant": v.name, "backend": where, "format": "none", "computes": "not quantized",
                         "activations": "–", "evidence": "the checkpoint has no quantization_config"})
        for f in n.formats.values():
            if f.evidence == "measured":
                ev = f"measured ({f.measured_by})"
            elif f.kernel:
                ev = f"kernel {f.kernel} named in vLLM's log" + (f"; {f.detail}" if f.detail else "")
            else:
                ev = f"not measured ({f.detail})" if f.detail else "not measured"
            rows.append({"variant": v.name, "backend": where, "format": f.format,
                         "computes": f.computes or "not measured", "activations": f.activations or "–", "evidence": ev})
    return rows


