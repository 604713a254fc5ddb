"""``quantize --devices 0,1 --max-memory 0=…,1=…`` checked on the CPU — the flags, the device
map accelerate plans on the meta device for fake GPUs (a cap one device alone cannot meet splits the model;
caps too small for it are refused before any weight is read, unless host memory is allowed) — and the CPU
path without ``--devices`` as before (no device map; null peaks)."""

from __future__ import annotations

import argparse
import json

import pytest

from quantgate.errors import InputError
from quantgate.quantize.devices import check_flags, check_visible, parse_devices, parse_max_memory, plan_device_map
from tests.support.paths import REPO

READER = REPO / "quantgate" / "assets" / "reader"
MIB = 2**20


def test_the_flags_parse_and_bad_ones_are_one_line():
    assert parse_devices("0,1") == [0, 1] and parse_devices("3") == [3] and parse_devices("0,") == [0]
    for bad in ("0,0", "a", "-1", ",", "1,1,2"):
        with pytest.raises(argparse.ArgumentTypeError, match="distinct CUDA device indices"):
            parse_devices(bad)
    assert parse_max_memory("0=20GiB,1=500MB,cpu=100GiB") == {"0": "20GiB", "1": "500MB", "cpu": "100GiB"}
    for bad, why in (("0=20", "not a size"), ("gpu0=1GiB", "DEVICE=SIZE"), ("0=1GiB,0=2GiB", "twice"),
                     ("0", "DEVICE=SIZE"), ("0=0GiB", "not a size")):
        with pytest.raises(InputError, match=why):
            parse_max_memory(bad)


@pytest.mark.parametrize("devices, caps, device, pipeline, match", [
    (None, {"0": "1GiB"}, "auto", None, "--max-memory caps the devices of --devices"),
    ([0, 1], None, "cuda:0", None, "--device cuda:0 and --devices 0,1"),
    ([0, 1], None, "auto", "sequential", "onloads every layer to one device"),
    ([0, 1], {"2": "1GiB"}, "auto", None, "caps device 2, which is not in --devices 0,1"),
])
def test_flag_combinations_that_cannot_work(devices, caps, device, pipeline, match):
    with pytest.raises(InputError, match=match):
        check_flags(devices, caps, device, pipeline)
    check_flags(None, None, "auto", "sequential")  # no --devices: nothing changes


def test_devices_on_a_machine_without_them_are_refused():
    with pytest.raises(InputError, match=r"--devices 0,1: no CUDA device is visible"):
        check_visible([0, 1])


def test_a_cap_one_device_cannot_meet_splits_the_model_over_two():
    # the reader is ~11 MB in BF16: 8 MB per device holds it only over both
    dmap, per = plan_device_map(READER, [0, 1], {"0": "8MB", "1": "8MB"})
    assert set(dmap.values()) == {"0", "1"} and per["0"] <= 8e6 and per["1"] <= 8e6
    assert all(not k.startswith("model.language_model.layers.0.") for k in dmap)  # a decoder layer stays whole
    assert dmap["model.visual"] == "0"  # accelerate fills device 0 first, in module order
    whole, per1 = plan_device_map(READER, [0], {"0": "100MB"})
    assert whole == {"": "0"} and sum(per.values()) == per1["0"]  # the same weights, all of them placed
    # a device without a cap offers its free memory (measured on a GPU; given here)
    free, _ = plan_device_map(READER, [0, 1], {"0": "4MB"}, free={1: 100 * MIB})
    assert set(free.values()) == {"0", "1"}


def test_caps_too_small_are_refused_before_any_weight_is_read_unless_host_memory_is_allowed():
    with pytest.raises(InputError, match=r"--max-memory 0=4MB,1=4MB: the GPUs 0,1 hold 0\.0\d GiB of the model's "
                       r"0\.01 GiB \(BF16\); 0\.0\d GiB would go to disk\. Raise the caps.*cpu=SIZE"):
        plan_device_map(READER, [0, 1], {"0": "4MB", "1": "4MB"})
    dmap, per = plan_device_map(READER, [0, 1], {"0": "4MB", "1": "4MB", "cpu": "1GiB"})
    assert "cpu" in set(dmap.values()) and per["cpu"] > 0


def test_the_cli_refuses_devices_on_cpu_and_writes_nothing(tmp_path, capsys):
    from quantgate.cli import main

    out = tmp_path / "v"
    assert main(["quantize", str(READER), "--recipe", "bf16", "-o", str(out), "--devices", "0,1"]) == 64
    assert "--devices 0,1: no CUDA device is visible" in capsys.readouterr().err and not out.exists()
    assert main(["quantize", str(READER), "--recipe", "bf16", "-o", str(out), "--max-memory", "0=1GiB"]) == 64
    assert "give --devices too" in capsys.readouterr().err
    assert main(["quantize", str(READER), "--recipe", "bf16", "-o", str(out), "--devices", "0",
                 "--max-memory", "0=lots"]) == 64
    assert "--max-memory '0=lots': 'lots' is not a size" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["quantize", str(READER), "--recipe", "bf16", "-o", str(out), "--devices", "0,x"])
    assert "CUDA device indices" in capsys.readouterr().err and not any(tmp_path.iterdir())


def test_without_devices_the_cpu_build_records_no_map_and_null_peaks(tmp_path):
    from quantgate.quantize import quantize

    m = quantize(READER, "bf16", tmp_path / "bf16", log=lambda s: None).manifest
    assert m.devices is None and m.peak_gpu_mb_per_device is None and m.peak_gpu_mb is None
    saved = json.loads((tmp_path / "bf16" / "quantgate.json").read_text())
    assert saved["devices"] is None and saved["peak_gpu_mb_per_device"] is None
