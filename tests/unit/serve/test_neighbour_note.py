"""The idle-neighbour note beside a speed measured with the study's other servers up on the same GPU
(``servers: all_at_once``) states a measurement: it must agree with the committed one it cites
(lab/2026-12-04-ten-minutes/neighbours.json: bf16 and fp8-dynamic measured alone and beside three idle servers),
and it is left out where no server was beside the measured one."""

import json
import re
import statistics

import pytest

from quantgate.schema.placement import VariantPlacement
from quantgate.schema.run import ServerLayout
from quantgate.serve.run import neighbour_notes
from tests.support.paths import REPO

MEASURED = REPO / "lab" / "2026-12-04-ten-minutes" / "neighbours.json"


def _layout(servers: str, n: int, **placement) -> ServerLayout:
    p = VariantPlacement.model_validate(placement) if placement else None
    return ServerLayout(servers=servers, servers_in_study=n, placement=p)


def test_the_note_states_what_the_committed_measurement_shows():
    (note,) = neighbour_notes(_layout("all_at_once", 4))
    assert str(MEASURED.relative_to(REPO)) in note
    low, high = (int(x) for x in re.search(r"(-?\d+) % to \+(\d+) % of alone's", note).groups())
    data = json.loads(MEASURED.read_text())
    deviations, agree = [], []
    for by_level in data["variants"].values():
        for row in by_level.values():
            alone = statistics.median(row["alone"]["wave_tok_s"])
            for run in ("cold", "warm"):  # three idle servers beside the measured one
                deviations.append(100 * (statistics.median(row[run]["wave_tok_s"]) / alone - 1))
                if row[run]["vs_bf16"] is not None:  # the speed-up's 90 % interval beside alone's
                    (_, lo, hi), (_, alo, ahi) = row[run]["vs_bf16"], row["alone"]["vs_bf16"]
                    agree.append(lo <= ahi and alo <= hi)
    assert (round(min(deviations)), round(max(deviations))) == (low, high)
    assert agree and all(agree)  # "agree with those measured alone within their 90 % intervals"


@pytest.mark.parametrize("layout", [None, _layout("one_at_a_time", 3), _layout("all_at_once", 1),
                                    _layout("all_at_once", 3, variant="a", gpus=[1])])  # a GPU of its own
def test_no_note_without_a_server_beside_the_measured_one(layout):
    assert neighbour_notes(layout) == []


def test_a_server_sharing_its_gpu_in_the_wave_carries_the_note():
    assert neighbour_notes(_layout("all_at_once", 3, variant="a", gpus=[0], shares_gpu_with=["b"]))
