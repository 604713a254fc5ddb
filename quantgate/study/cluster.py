"""A study over a Ray cluster: ``cluster: {ray: ADDRESS}`` in the study, or ``quantgate study --ray
ADDRESS``. Each variant's quantize runs as a Ray task and its server as a Ray actor, on whichever node has the
GPUs it needs (or, on a CPU cluster, the study's custom ``resources``); the client, scoring, verdicts and
report stay on the driver (the ``quantgate study`` process). Ray is imported here only: the single-machine
study never needs it (``pip install quantgate[cluster]``).

Storage: the study's output folder — where variants are written, servers read them and write their logs,
and the driver reads the logs — must be one shared filesystem mounted at the same path on every node that
runs work (NFS, a cluster volume); so must the source model and an imported page set. Before any work the
driver writes a random token into the output folder and every such node must read it back from the same
path, and read the model's ``config.json`` (and the page set's ``pages.jsonl``) with the driver's bytes; a
node that cannot is named in one error. Every node must also run the same quantgate and the packages that
decide a variant's weights.

A lost node: a quantize task on it is retried by Ray on another node (the build folder it left is removed by
the next build); a server on it is started again on another node and its variant's pages resume request
by request (``cluster_server.survive``). Nodes are placed on as the cluster stands when the study starts."""

from __future__ import annotations

import hashlib
import secrets
import socket
import threading
from pathlib import Path

from quantgate.errors import InputError
from quantgate.schema.placement import ClusterSpec, Device

# what every node must share with the driver: the code and the packages that decide a variant's weights
_SAME_PACKAGES = ("quantgate", "llmcompressor", "compressed-tensors", "transformers", "torch")


def cluster_spec(st, ray_address: str | None) -> ClusterSpec:
    """``--ray`` over the study's ``cluster:`` (keeping its other fields)."""
    spec = st.cluster or ClusterSpec(ray=ray_address)
    if ray_address:
        spec = spec.model_copy(update={"ray": ray_address})
    if st.gpus:
        raise InputError("field 'gpus': with a cluster, Ray assigns each server its GPUs; remove 'gpus'")
    return spec


def open_cluster(st, ray_address: str | None, base: Path, out: Path, log=print):
    """Connected, every node that may run work checked (storage, versions): before anything is written."""
    from quantgate.study.spec import resolve_path

    cluster = Cluster(cluster_spec(st, ray_address), st, log)
    cluster.connect()
    try:
        shared = {"model": resolve_path(base, st.model) / "config.json"}
        if st.pages.path:
            shared["pages"] = resolve_path(base, st.pages.path) / "pages.jsonl"
        cluster.check_nodes(Path(out), shared)
    except BaseException:
        cluster.close()
        raise
    return cluster


def uses_gpus(backend_spec) -> bool:
    """Whether a backend's servers run on GPUs: vLLM always; transformers serve unless on the CPU."""
    if "tensor_parallel_size" in type(backend_spec).model_fields:
        return True
    return str(getattr(backend_spec, "device", "cpu")) != "cpu" and "device" in type(backend_spec).model_fields


class Cluster:
    def __init__(self, spec: ClusterSpec, st, log=print):
        self.spec, self.st, self.log = spec, st, log
        self.gpu_servers = uses_gpus(st.backend)
        self._nodes: list[dict] = []
        self._connected = False

    # --- connection -------------------------------------------------------------------------------------

    def connect(self) -> None:
        """``ray.init`` on the address, within ``connect_timeout_s``: first whether anything listens there, then
        whether it answers as a Ray cluster (in a thread, so a silent listener cannot hang the study)."""

        addr, t = self.spec.ray, self.spec.connect_timeout_s
        if addr != "auto":
            host, port = _host_port(addr)
            try:
                socket.create_connection((host, port), timeout=min(t, 10)).close()
            except OSError as e:
                raise InputError(f"cluster.ray {addr}: nothing answers there ({e}); start the head (`ray start "
                                 "--head`) or give its address (host:6379, or ray://host:10001)") from None
        try:
            import ray
        except ImportError:
            raise InputError(f"cluster.ray {addr}: Ray is not installed in this environment; install the cluster "
                             "extra (`pip install 'quantgate[cluster]'`, ray[default]==2.60.0) here and on every "
                             "node, or run the study without `cluster:` / `--ray`") from None
        done: dict = {}

        def init() -> None:
            try:
                ray.init(address=addr, namespace="quantgate", log_to_driver=False, logging_level="ERROR")
                done["ok"] = True
            except BaseException as e:  # noqa: BLE001 — reported below, in the study's words
                done["error"] = e

        th = threading.Thread(target=init, name="ray.init", daemon=True)
        th.start()
        th.join(t)
        if th.is_alive() or "error" in done:
            why = f"did not answer as a Ray cluster within {t:.0f} s" if th.is_alive() else \
                f"refused the connection ({str(done['error']).splitlines()[0][:200]})"
            raise InputError(f"cluster.ray {addr}: {why}; check the address (the head's GCS port, 6379 by default) "
                             "and that the head runs the same Ray version")
        self._connected = True
        self._nodes = [n for n in ray.nodes() if n.get("Alive")]
        self.log(f"cluster: {addr}: {len(self._nodes)} node(s) alive")

    def close(self) -> None:
        if self._connected:
            import ray

            ray.shutdown()
            self._connected = False

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- what work needs, and which nodes have it --------------------------------------------------------

    def server_options(self, devices: int, fraction: float | None) -> dict:
        """Ray options of a server actor: its GPUs (a fraction of one when a single-GPU server declares its
        memory share, so Ray packs them as the placement did) and the study's custom resources."""
        gpus = 0.0
        if self.gpu_servers:
            gpus = fraction if devices == 1 and fraction else float(devices)
        return {"num_cpus": 0, "num_gpus": gpus, "resources": dict(self.spec.resources)}

    def quantize_options(self) -> dict:
        """A quantize task takes one GPU on a cluster that has GPUs (calibration there), else the CPU."""
        has_gpus = any(n["Resources"].get("GPU", 0) >= 1 for n in self._nodes)
        return {"num_cpus": 0, "num_gpus": 1 if has_gpus else 0, "resources": dict(self.spec.resources),
                "max_retries": 3, "retry_exceptions": False}

    def work_nodes(self) -> list[dict]:
        """Alive nodes with the study's custom resources (and GPUs, for GPU servers): where work may run."""
        need = self.spec.resources
        nodes = [n for n in self._nodes if all(n["Resources"].get(k, 0) >= v for k, v in need.items())]
        if self.gpu_servers:
            nodes = [n for n in nodes if n["Resources"].get("GPU", 0) >= 1]
        if not nodes:
            what = (f"the resources {need}" if need else "") + (" and " if need and self.gpu_servers else "") + \
                ("a GPU" if self.gpu_servers else "")
            raise InputError(f"cluster.ray {self.spec.ray}: no alive node has {what or 'room'}; "
                             f"nodes: {[_node_text(n) for n in self._nodes]}")
        return nodes

    def pool(self) -> list[Device]:
        """The placement pool: per work node one slot per GPU (GPU servers) or per unit of the custom resources
        a server takes; with neither, a slot per variant (nothing limits them)."""
        out = []
        for n in self.work_nodes():
            res = n["Resources"]
            if self.gpu_servers:
                slots = int(res.get("GPU", 0))
            elif self.spec.resources:
                slots = int(min(res.get(k, 0) // v for k, v in self.spec.resources.items()))
            else:
                slots = len(self.st.variants)
            out += [Device(host=n["NodeID"], index=i) for i in range(slots)]
        return out

    def placement(self, st, model: Path):
        """The study's placement over the cluster's slots, its TP sizes checked against the heads of ``model``."""
        from quantgate.study.placement import checked_placement

        return checked_placement(st, model, self.pool(), placed_by="ray")

    # --- storage and versions on every node --------------------------------------------------------------

    def check_nodes(self, out: Path, shared: dict[str, Path]) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        out = out.resolve()
        created = not out.exists()
        token = secrets.token_hex(16)
        probe = out / f".cluster-probe-{token[:12]}"
        expect = {what: _sha256(p) for what, p in shared.items()}
        mine = _versions()
        nodes = self.work_nodes()
        try:
            out.mkdir(parents=True, exist_ok=True)
            probe.write_text(token)
            task = ray.remote(_probe_node)
            refs = {n["NodeID"]: task.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                n["NodeID"], soft=False)).remote(str(probe), {k: str(p.resolve()) for k, p in shared.items()})
                for n in nodes}
            seen = {}
            for nid, ref in refs.items():
                try:
                    seen[nid] = ray.get(ref, timeout=self.spec.node_timeout_s)
                except Exception as e:  # noqa: BLE001 — a node that cannot run the check cannot run work
                    seen[nid] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            problem = storage_problem(nodes, seen, out, token, {k: p.resolve() for k, p in shared.items()}, expect, mine)
            if problem:
                raise InputError(problem)
        except BaseException:
            probe.unlink(missing_ok=True)
            if created:
                _remove_empty(out)
            raise
        probe.unlink(missing_ok=True)
        self.log(f"cluster: {len(nodes)} work node(s) see {out} and the model; same quantgate and packages")

    # --- work --------------------------------------------------------------------------------------------

    def quantize(self, model, recipe, vdir, **kw) -> dict:
        """``quantgate.quantize.quantize`` as a Ray task on a node with the resources; what it logs is replayed
        through ``log`` when it returns."""
        import ray

        log = kw.pop("log", None) or (lambda m: None)
        kw.pop("note", None)  # the driver console's live status line: a task on another node cannot call it
        task = ray.remote(_quantize_on_node).options(**self.quantize_options())
        try:
            manifest, messages, node = ray.get(task.remote(model, recipe, vdir, kw))
        except ray.exceptions.RayTaskError as e:
            raise e.cause if isinstance(e.cause, Exception) else e from None
        log(f"quantized on Ray node {node[:12]}")
        for m in messages:
            log(m)
        return manifest

    @property
    def server_class(self):
        from quantgate.study.cluster_server import ray_server_class

        return ray_server_class(self)


def storage_problem(nodes: list[dict], seen: dict[str, dict], out: Path, token: str, shared: dict[str, Path],
                    expect: dict[str, str | None], mine: dict) -> str | None:
    """The first node that cannot work on this study's files, in one sentence, or None. ``seen``: per node id
    what ``_probe_node`` read there."""
    for n in nodes:
        got = seen.get(n["NodeID"]) or {"error": "no answer"}
        who = _node_text(n)
        if "error" in got:
            return f"cluster node {who}: could not run the storage check ({got['error']})"
        if got.get("token") != token:
            return (f"cluster node {who} cannot read the study folder {out} the driver writes ({got.get('token_error')}): "
                    "put the output (-o / output:) on storage every node mounts at the same path (NFS, a shared volume)")
        for what, p in shared.items():
            if got.get(what) != expect[what]:
                return (f"cluster node {who} cannot read the study's {what} {p} as the driver does "
                        f"({got.get(what + '_error') or 'its bytes differ'}): put it on storage every node mounts at "
                        "the same path")
        for pkg, ver in mine.items():
            if got.get("versions", {}).get(pkg) != ver:
                return (f"cluster node {who} runs {pkg} {got.get('versions', {}).get(pkg)}, the driver {ver}: every "
                        "node must run the same quantgate and packages (the variants' weights depend on them)")
    return None


def _probe_node(probe: str, shared: dict[str, str]) -> dict:
    """On one node: the token, the sha256 of each shared file, the versions (``storage_problem`` judges them)."""
    got: dict = {"versions": _versions()}
    try:
        got["token"] = Path(probe).read_text()
    except OSError as e:
        got["token"], got["token_error"] = None, f"{type(e).__name__}: {e}"
    for what, p in shared.items():
        try:
            got[what] = _sha256(Path(p))
        except OSError as e:
            got[what], got[what + "_error"] = None, f"{type(e).__name__}: {e}"
    return got


def _quantize_on_node(model, recipe, vdir, kw: dict):
    import ray

    from quantgate.quantize import quantize

    messages: list[str] = []
    manifest = quantize(model, recipe, vdir, log=messages.append, **kw)
    return manifest, messages, ray.get_runtime_context().get_node_id()


def _versions() -> dict:
    from quantgate.io.provenance import git_commit, package_versions

    return {**package_versions(list(_SAME_PACKAGES)), "quantgate commit": git_commit()}


def _sha256(p: Path) -> str | None:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest() if Path(p).is_file() else None


def _host_port(addr: str) -> tuple[str, int]:
    rest = addr.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"cluster.ray {addr!r}: give host:port (the head's GCS, e.g. 10.0.0.5:6379), "
                         "ray://host:port or auto")
    return host.strip("[]"), int(port)


def _node_text(n: dict) -> str:
    return f"{n['NodeID'][:12]} ({n.get('NodeManagerAddress', '?')})"


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
