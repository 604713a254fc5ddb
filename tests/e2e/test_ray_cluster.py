"""A study over a Ray cluster, on a local multi-node cluster (``ray.cluster_utils.Cluster``: a
head that runs no work and two nodes with the custom resource ``quantgate``) with ``transformers serve`` on the
bundled reader — the same verdicts as the same study on this machine; a node killed under a server mid-study,
survived on the other node with the same verdicts; a node that cannot see the study folder (a real mount
namespace hides it) refused by name before any work; an address that does not answer refused within a bound.

CPU time: starting the nodes and three studies of 3 variants × ~6 pages take minutes on 2 cores: slow."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from quantgate.errors import InputError
from tests.support.paths import REPO

pytestmark = pytest.mark.slow
VARIANTS = ["bf16", "fp8-dynamic", "harmful-int2"]
RESOURCE = "quantgate"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent_ports() -> dict:
    # fixed ports: a raylet waits only 15 s for an agent to report a port it chose itself, too short on a
    # loaded 2-core machine
    return {"metrics_agent_port": _free_port(), "dashboard_agent_listen_port": _free_port()}


@pytest.fixture(scope="module")
def cluster():
    ray_utils = pytest.importorskip("ray.cluster_utils")
    temp = tempfile.mkdtemp(prefix="qgray", dir="/tmp")  # short: Ray's socket paths live under it
    # Ray 2.60's Cluster writes the head's address into the *default* temp dir (/tmp/ray), whatever temp_dir
    # says, without creating it: on a fresh machine that is a FileNotFoundError
    from ray._common.utils import get_default_ray_temp_dir

    os.makedirs(get_default_ray_temp_dir(), exist_ok=True)
    c = ray_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "temp_dir": temp, **_agent_ports(),
        # a killed node is marked dead within seconds (the default allows it ~30 s)
        "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}})
    for _ in range(2):
        c.add_node(num_cpus=1, resources={RESOURCE: 1}, **_agent_ports())
    try:
        yield c
    finally:
        c.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def _study(path: Path, out: Path, cluster=None) -> Path:
    from quantgate.study.demo import demo_study

    body = demo_study(8, VARIANTS, min_pages=4)
    body.pop("lm_eval")
    body.update(max_tokens=24, resamples=2000, output=str(out))
    if cluster is not None:
        body["cluster"] = {"ray": cluster.address, "resources": {RESOURCE: 1}, "connect_timeout_s": 60}
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _verdicts(rep) -> dict:
    return {(v.variant, v.metric): (v.verdict, v.reason, v.n, v.delta) for v in rep.summary.verdicts}


def _work_nodes(cluster) -> set[str]:
    return {n.node_id for n in cluster.worker_nodes}


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    from quantgate.study import run_study

    root = tmp_path_factory.mktemp("local")
    rep = run_study(_study(root / "study.yaml", root / "out"), log=lambda s: None)
    assert {v for v, _ in _verdicts(rep)} == {"fp8-dynamic", "harmful-int2"}
    return root / "out", rep


@pytest.fixture(scope="module")
def on_cluster(cluster, tmp_path_factory):
    from quantgate.study import run_study

    root = tmp_path_factory.mktemp("ray")
    lines: list[str] = []
    rep = run_study(_study(root / "study.yaml", root / "out", cluster), log=lines.append)
    return root / "out", rep, lines


def test_a_study_on_two_nodes_reaches_the_local_verdicts(local, on_cluster, cluster):
    _, local_rep = local
    out, rep, lines = on_cluster
    assert _verdicts(rep) == _verdicts(local_rep)
    assert {v for (v, _), (word, *_) in _verdicts(rep).items() if word == "regression"} == {"harmful-int2"}
    # every quantize ran as a Ray task and every server as an actor on a work node; the placement went round both
    assert sum(line.startswith("quantized on Ray node") for line in lines) == len(VARIANTS)
    nodes = set()
    for v in VARIANTS:
        placed = json.loads((out / "runs" / v / "run.json").read_text())["layout"]["placement"]
        assert placed["placed_by"] == "ray" and placed["node"] in _work_nodes(cluster)
        nodes.add(placed["node"])
    assert nodes == _work_nodes(cluster)
    # the weights the nodes wrote are the ones this machine builds
    local_out, _ = local
    for v in VARIANTS:
        a = json.loads((out / "variants" / v / "quantgate.json").read_text())["files"]
        b = json.loads((local_out / "variants" / v / "quantgate.json").read_text())["files"]
        assert {k: f["sha256"] for k, f in a.items()} == {k: f["sha256"] for k, f in b.items()}, v


def test_a_node_that_cannot_see_the_study_folder_is_named_before_any_work(cluster, tmp_path):
    """A third node started in its own mount namespace, where a tmpfs hides the folder the study writes to."""
    import ray

    shared = tmp_path / "shared"
    shared.mkdir()
    ports = _agent_ports()
    cmd = (f"mount -t tmpfs tmpfs {shared} && exec {sys.executable} -m ray.scripts.scripts start --block "
           f"--address={cluster.address} --num-cpus=1 --resources='{json.dumps({RESOURCE: 1})}' "
           f"--dashboard-agent-grpc-port={ports['metrics_agent_port']} "
           f"--dashboard-agent-listen-port={ports['dashboard_agent_listen_port']}")
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", cmd], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_nodes(ray, cluster.address, 3 + 1)
        from quantgate.study import run_study

        out = shared / "out"
        with pytest.raises(InputError, match=rf"cluster node [0-9a-f]{{12}} \(.*\) cannot read the study folder "
                           rf"{out} the driver writes \(FileNotFoundError.*storage every node mounts"):
            run_study(_study(tmp_path / "study.yaml", out, cluster), log=lambda s: None)
        assert not out.exists()  # nothing written: the probe and the folder it made are gone
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        _wait_nodes(ray, cluster.address, 3)


def test_a_node_killed_under_a_server_mid_study_is_survived_with_the_same_verdicts(local, on_cluster, cluster,
                                                                                  tmp_path):
    from quantgate.study import run_study

    _, local_rep = local
    done_out, _, _ = on_cluster
    out = tmp_path / "out"
    shutil.copytree(done_out / "variants", out / "variants")  # reused by fingerprint: only the serving is redone
    lines: list[str] = []
    result: dict = {}

    def study() -> None:
        try:
            result["rep"] = run_study(_study(tmp_path / "study.yaml", out, cluster), log=lines.append)
        except BaseException as e:  # noqa: BLE001 — reported by the assertion below
            result["error"] = e

    th = threading.Thread(target=study)
    th.start()
    victim = "fp8-dynamic"
    records = out / "runs" / victim / "requests.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and th.is_alive():
        if records.is_file() and len(records.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    started = [x for x in lines if x.startswith(f"{victim}: server on Ray node ")]
    assert started, lines[-20:]
    node_id = started[-1].split("Ray node ")[1].split()[0]
    node = next(n for n in cluster.worker_nodes if n.node_id.startswith(node_id))
    cluster.remove_node(node, allow_graceful=False)  # SIGKILL: the raylet, and with it the server's actor
    th.join(900)
    assert not th.is_alive() and "error" not in result, result.get("error")
    assert any("its node was lost" in x for x in lines)
    rep = result["rep"]
    assert _verdicts(rep) == _verdicts(local_rep)
    placed = json.loads((out / "runs" / victim / "run.json").read_text())["layout"]["placement"]
    assert placed["node"] != node.node_id and placed["node"] in _work_nodes(cluster)
    recs = [json.loads(x) for x in records.read_text().splitlines()]
    assert any(r["error"] for r in recs)  # the requests in flight failed with the node, and were sent again
    assert rep.summary.complete


def test_a_cluster_without_ray_installed_is_refused_with_the_install_command(tmp_path):
    """Ray is an extra (``quantgate[cluster]``): a study given a live address in an environment without it says
    what to install instead of a traceback. ``sys.modules["ray"] = None`` makes ``import ray`` fail as a missing
    package does, whether or not Ray is installed here."""
    out = tmp_path / "out"
    study = _study(tmp_path / "study.yaml", out)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        addr = f"127.0.0.1:{listener.getsockname()[1]}"
        code = ("import sys; sys.modules['ray'] = None; from quantgate.cli import main; "
                f"sys.argv = ['quantgate', 'study', {str(study)!r}, '--ray', {addr!r}]; raise SystemExit(main())")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 65, r.stderr[-2000:]
    assert f"cluster.ray {addr}: Ray is not installed" in r.stderr and "quantgate[cluster]" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def _wait_nodes(ray, address: str, alive: int, timeout: float = 120) -> None:
    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        deadline = time.monotonic() + timeout
        while sum(n["Alive"] for n in ray.nodes()) != alive:
            assert time.monotonic() < deadline, [(n["NodeID"][:8], n["Alive"]) for n in ray.nodes()]
            time.sleep(0.5)
    finally:
        ray.shutdown()


def test_an_address_that_does_not_answer_is_refused_within_the_bound(tmp_path):
    out = tmp_path / "out"
    study = _study(tmp_path / "study.yaml", out)
    dead = f"127.0.0.1:{_free_port()}"  # nothing listens
    r = subprocess.run([sys.executable, "-m", "quantgate", "study", str(study), "--ray", dead], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    assert r.returncode == 65 and f"cluster.ray {dead}: nothing answers there" in r.stderr, r.stderr[-2000:]
    pytest.importorskip("ray")
    # a port that accepts the connection but never speaks Ray's protocol: the wait is bounded
    body = yaml.safe_load(study.read_text())
    body["cluster"] = {"ray": "unused", "connect_timeout_s": 5}
    study.write_text(yaml.safe_dump(body))
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "quantgate", "study", str(study), "--ray", addr],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 65 and f"cluster.ray {addr}: " in r.stderr, r.stderr[-2000:]
    assert "within 5 s" in r.stderr or "refused the connection" in r.stderr
    assert time.monotonic() - t0 < 120 and not out.exists()
