"""A variant's server as a Ray actor: the actor starts the backend's own server process
(``ManagedServer``, as on one machine) on its node, bound to the node's address, and the driver talks to it
over the network. The driver holds a ``RemoteServer`` where a study holds a ``ManagedServer``: the same
name, command, environment, start seconds and log (on the shared study folder, read from where this start
began), so ``serve_variant`` records a remote run exactly as a local one.

``survive``: when the node under a variant's server is lost, the server is started again on another node and
the variant's pages resume request by request (the requests in flight are recorded as failed and re-sent)."""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quantgate.errors import ServerError
from quantgate.serve.server import Endpoint, SharedServer, log_since

_RESTARTS = 2  # a variant's server is started again at most this often after losing its node


def bind_host(command: list[str], host: str) -> list[str]:
    """The server command listening on ``host`` (its ``--host`` value replaced): the driver is on another machine."""
    out = list(command)
    for i, a in enumerate(out):
        if a == "--host" and i + 1 < len(out):
            out[i + 1] = host
        elif a.startswith("--host="):
            out[i] = f"--host={host}"
    return out


class ServerHost:
    """The Ray actor (``ray.remote`` is applied where it is created, so this module imports without Ray)."""

    def __init__(self):
        self.server = None

    def start(self, backend, model: str, log_path: str, env: dict[str, str]) -> dict:
        import ray

        ip = ray.util.get_node_ip_address()
        server = backend.server(Path(model), Path(log_path))
        server.env = {**server.env, **env}
        inner = server.make_command
        server.make_command = lambda port: bind_host(inner(port), ip)
        server.host = ip
        self.server = server
        server.start()  # health polled here, on the node; raises ServerError with the log tail
        ctx = ray.get_runtime_context()
        return {"host": ip, "port": server.port, "command": server.command, "start_s": server.start_s,
                "log_offset": server.log_offset, "env": dict(server.env), "name": server.name,
                "node": ctx.get_node_id(), "gpus": [str(g) for g in ray.get_gpu_ids()]}

    def alive(self) -> bool:
        return self.server is not None and self.server.alive()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@dataclass
class RemoteServer:
    """The driver's view of a server a ``ServerHost`` actor runs: what ``serve_variant`` reads of a server."""

    actor: Any
    name: str
    log_path: Path
    host: str = "127.0.0.1"
    port: int | None = None
    command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    start_s: float | None = None
    log_offset: int = 0
    node: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def alive(self) -> bool:
        import ray

        try:
            return bool(ray.get(self.actor.alive.remote(), timeout=30))
        except Exception:  # noqa: BLE001 — an actor that does not answer (its node gone) serves nothing
            return False

    def log_text(self) -> str:
        return log_since(self.log_path, self.log_offset)

    def stop(self) -> None:
        import ray

        try:
            ray.get(self.actor.stop.remote(), timeout=60)
        except Exception:  # noqa: BLE001 — gone already
            pass
        ray.kill(self.actor)

    def cancel(self) -> None:
        import ray

        ray.kill(self.actor)


def ray_server_class(cluster):
    """A ``SharedServer`` whose start is a ``ServerHost`` actor on the cluster (the rest — prestart, sharing with
    lm-eval, close — is SharedServer's own)."""

    class RaySharedServer(SharedServer):
        lost_nodes = 0

        def _start(self, background: bool) -> None:
            name = f"{self.backend.name} server"
            with self.starting(name, background) if self.starting else nullcontext():
                self._ep = self._stack.enter_context(self._on_cluster())
            self.starts += 1

        @contextmanager
        def _on_cluster(self):
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            if self.backend.serves_local_weights:
                from quantgate.io.modeldir import check_model_dir

                check_model_dir(self.model)
            placed = self.layout.placement if self.layout is not None else None
            opts = cluster.server_options(placed.parallel.devices_needed if placed else 1,
                                          placed.memory_fraction if placed else None)
            if placed is not None and placed.host and not self.lost_nodes:
                # the node the placement planned (soft: another one when it is gone)
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(placed.host, soft=True)
            actor = ray.remote(ServerHost).options(max_restarts=0, **opts).remote()
            proxy = RemoteServer(actor, name=f"{self.backend.name} server {self.model.name}", log_path=self.log_path)
            self._server = proxy  # close() from another thread cancels the start
            timeout = getattr(self.backend.options, "startup_timeout_s", 600.0) + 120  # + scheduling on a node
            self.log(f"starting {self.backend.name} server {self.model.name} on the Ray cluster …")
            try:
                info = ray.get(actor.start.remote(self.backend, str(self.model), str(self.log_path), self.env),
                               timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                ray.kill(actor)
                raise ServerError(f"{proxy.name}: not started on the cluster within {timeout:.0f} s: no node freed "
                                  f"the resources it asks ({opts.get('num_gpus')} GPU, {opts.get('resources')}), or "
                                  f"it did not become healthy; log {self.log_path}") from None
            except ray.exceptions.RayTaskError as e:
                ray.kill(actor)
                raise (e.cause if isinstance(e.cause, Exception) else ServerError(str(e))) from None
            except ray.exceptions.RayActorError as e:
                raise ServerError(f"{proxy.name}: its Ray actor died while starting ({str(e).splitlines()[0]})") from None
            for k in ("host", "port", "command", "env", "start_s", "log_offset", "node", "name"):
                setattr(proxy, k, info[k])
            if placed is not None:
                placed.node, placed.node_gpus = info["node"], info["gpus"]
                placed.node_ip = info["host"]
            self.log(f"{self.model.name}: server on Ray node {info['node'][:12]} ({info['host']}:{info['port']}), "
                     f"GPUs {','.join(info['gpus']) or 'none'}")
            try:
                yield Endpoint(proxy.base_url, self.backend.model_name(self.model), self.backend.api_key(), proxy)
            finally:
                proxy.stop()

        def node_lost(self) -> bool:
            """Whether the server started is gone with its node (not a server that failed by itself)."""
            proxy = self._server
            if not isinstance(proxy, RemoteServer) or proxy.node is None:
                return False
            import ray

            return not any(n["NodeID"] == proxy.node and n.get("Alive") for n in ray.nodes())

        def restart(self) -> None:
            """Forget the lost server, so the next use starts one on another node."""
            self.lost_nodes += 1
            try:
                self.close()
            except Exception:  # noqa: BLE001 — its node is gone; nothing to stop cleanly
                pass
            self._stack = type(self._stack)()
            self._ready.clear()
            self._release.clear()
            self._error = None

    return RaySharedServer


def survive(serve, server, log=print) -> None:
    """``serve()`` (a variant's page runs and lm-eval), started again on another node when the node under its
    server is lost: the records resume request by request, the failed ones re-sent."""
    for attempt in range(_RESTARTS + 1):
        try:
            return serve()
        except ServerError:
            lost = getattr(server, "node_lost", None)
            if attempt == _RESTARTS or lost is None:
                raise
            deadline = time.monotonic() + 90  # the GCS marks a dead node after its health checks fail (~30 s by default)
            while not lost() and time.monotonic() < deadline:
                time.sleep(1)
            if not lost():
                raise
            log(f"{server.model.name}: its node was lost; starting its server on another node and resuming its pages")
            server.restart()
