"""Speed said honestly per backend. A quantized variant served by transformers serve (which
dequantizes to BF16) gets no speed-up number and no place on the Pareto plot, labelled instead; the SLO column
compares only the levels every variant was measured at; the throughput line follows the measured pages/s, and
a run's note claiming flat throughput is not repeated. On the synthetic finished study: bf16 measured at
concurrency 1 and 2 (1.0 → 1.5 pages/s), the candidates at 1 only."""

import json
import shutil
from pathlib import Path

import pytest

from quantgate.reports import write_reports
from quantgate.reports.speed import BF16_KERNELS
from tests.integration.test_reports import _build
from tests.integration.test_reports import _finished as _finished  # noqa: F401  (the module's fixture)


@pytest.fixture
def served_by_transformers(_finished, tmp_path):  # noqa: F811
    from compressed_tensors.quantization import preset_name_to_scheme

    from quantgate.serve.numerics import MEASURED_WITH, variant_numerics

    out = Path(shutil.copytree(_finished, tmp_path / "out"))
    dirs = {name: out / "variants" / name for name in ("bf16", "fp8", "bad")}
    fp8 = {"model_type": "x", "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "g0": {**preset_name_to_scheme("FP8_DYNAMIC", ["Linear"]).model_dump(mode="json"), "targets": ["a"]}}}}
    for name, cfg in {"bf16": {"model_type": "x"}, "fp8": fp8}.items():
        (dirs[name] / "config.json").write_text(json.dumps(cfg))
        f = out / "runs" / name / "run.json"
        run = json.loads(f.read_text())
        run["numerics"] = variant_numerics(dirs[name], "transformers", device="cpu",
                                           versions=dict(MEASURED_WITH)).model_dump()
        run["notes"] = ["transformers serve handles one request at a time: throughput is flat across concurrency "
                        "levels; use it for accuracy, vLLM for speed"]
        f.write_text(json.dumps(run))
    write_reports(_build(out, dirs), out)
    return out


def test_a_dequantizing_backend_gets_no_speedup_number(served_by_transformers):
    out = served_by_transformers
    by = {v["name"]: v for v in json.loads((out / "summary.json").read_text())["variants"]}
    assert set(by["fp8"]["speedup"].values()) == {None}  # 2.0 pages/s against 1.0: no "2.00×"
    assert by["bad"]["speedup"]["1"] == pytest.approx(3.0)  # no numerics recorded: its ratio stands
    md = (out / "report.md").read_text()
    speed = md[md.index("## Speed"):md.index("## Variants")]
    assert f"| fp8 | 1 | 2.000 | {BF16_KERNELS} |" in speed and "2.00×" not in speed
    html = (out / "report.html").read_text()
    assert f"<td>{BF16_KERNELS}</td>" in html
    assert "Not placed on the accuracy-versus-speed plot: fp8: " + BF16_KERNELS in html


def test_slo_rows_compare_only_levels_every_variant_was_measured_at(served_by_transformers):
    md = (served_by_transformers / "report.md").read_text()
    variants = md[md.index("## Variants"):md.index("## Numerics")]
    # bf16 alone was measured at 2 (its noise run): its row does not read "2" against the others' "1"
    assert "| bf16 | bf16 |" in variants
    bf16 = next(line for line in variants.splitlines() if line.startswith("| bf16 |"))
    assert bf16.endswith("| 1 (of 1; also measured at 2, which the others were not) |")
    assert next(line for line in variants.splitlines() if line.startswith("| bad |")).endswith("| 1 |")
    assert next(line for line in variants.splitlines() if line.startswith("| fp8 |")).endswith(f"| {BF16_KERNELS} |")


def test_the_throughput_note_follows_the_measured_numbers(served_by_transformers):
    md = (served_by_transformers / "report.md").read_text()
    assert "throughput is flat across" not in md
    assert "bf16: throughput rose from 1 pages/s at concurrency 1 to 1.5 at 2 (×1.50, measured)" in md
