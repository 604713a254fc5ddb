"""Start, watch and stop an OpenAI-compatible inference server process.

The server runs in its own process group with its log captured to a file, so that it and any
workers it spawns (vLLM does) are stopped together, and a failure can be reported with the log
tail rather than a bare exit code."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from quantgate.errors import ServerError


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now. Another process can still take it before the server binds;
    ``ManagedServer.start`` retries on another port when that happens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _libc_prctl():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except OSError:
        return None


# Resolved here, in the parent: the child between fork and exec must not import or dlopen (several threads
# start servers at once in a study with servers: all_at_once, and a lock held by one of them at fork would
# never be released in the child).
_PRCTL = _libc_prctl()


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM the server if quantgate itself dies (even by
    SIGKILL), so a killed run leaves no orphan server holding a GPU or a port."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def log_since(path: Path, offset: int) -> str:
    """One start's part of a server log: the file is appended across starts (and port retries), so facts read
    from it (version, kernels) must not come from an earlier start."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def log_tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


@dataclass
class ManagedServer:
    """A server process. ``command`` is built for a port by ``make_command(port)``."""

    name: str
    make_command: object  # Callable[[int], list[str]]
    log_path: Path
    host: str = "127.0.0.1"
    env: dict[str, str] = field(default_factory=dict)
    health_path: str = "/health"
    startup_timeout_s: float = 600.0
    port: int | None = None
    command: list[str] | None = None
    proc: subprocess.Popen | None = None
    start_s: float | None = None  # launch to healthy, of the start that succeeded
    log_offset: int = 0  # where this start's part of the (appended) log begins
    _t0: float = 0.0  # when the current start was launched
    _cancelled: bool = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def launch(self, port: int | None = None) -> ManagedServer:
        """Start the process and return at once; ``poll_healthy`` tells when it serves. Several servers can
        be launched from one thread and waited for together (the launching thread must outlive them: the
        server is stopped when it exits, see ``_die_with_parent``)."""
        if self._cancelled:
            raise ServerError(f"{self.name}: start cancelled")
        self.port = port if port is not None and not port_in_use(port, self.host) else free_port(self.host)
        self.command = list(self.make_command(self.port))  # type: ignore[operator]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.log_offset = log.tell()  # earlier starts' lines stay in the file but are not this start's
        log.write(f"\n$ {' '.join(self.command)}\n".encode())
        log.flush()
        env = {**os.environ, **self.env}
        self.start_s = None
        self._t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent if os.name == "posix" else None)
        except OSError as e:
            raise ServerError(f"{self.name}: cannot start {self.command[0]!r}: {e}") from None
        finally:
            log.close()
        return self

    def poll_healthy(self) -> bool:
        """One health check of a launched server: True once it answers (and ``start_s`` is set), False while
        it is still starting; ServerError if its process has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerError(f"{self.name}: server exited with code {self.proc.returncode} before it was healthy; "
                              f"log {self.log_path} ends with:\n{log_tail(self.log_path)}")
        try:
            r = httpx.get(f"http://{self.host}:{self.port}{self.health_path}", timeout=2.0)
        except httpx.HTTPError:
            return False
        if r.status_code != 200:
            return False
        self.start_s = round(time.monotonic() - self._t0, 2)
        return True

    def bound_elsewhere(self) -> bool:
        """Whether the last start failed because its port was taken meanwhile (worth another port)."""
        return "address already in use" in log_tail(self.log_path, 20).lower()

    def start(self, port: int | None = None, attempts: int = 3) -> ManagedServer:
        last = ""
        for _ in range(attempts):
            self.launch(port)
            port = None  # a taken port is not retried
            try:
                self._wait_healthy()
                return self
            except ServerError as e:
                last = str(e)
                bound_elsewhere = self.bound_elsewhere()
                self.stop()
                if not bound_elsewhere:
                    raise
        raise ServerError(last)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._cancelled:
                raise ServerError(f"{self.name}: start cancelled")
            if self.poll_healthy():
                return
            time.sleep(0.25)
        raise ServerError(f"{self.name}: not healthy after {self.startup_timeout_s:.0f} s at "
                          f"http://{self.host}:{self.port}{self.health_path}; log {self.log_path} ends with:\n"
                          f"{log_tail(self.log_path)}")

    def log_text(self) -> str:
        return log_since(self.log_path, self.log_offset)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cancel(self) -> None:
        """From another thread: end a start under way (the starting thread's ``start`` raises) and stop the
        process — a study interrupted while its servers compile does not wait for their startup timeout."""
        self._cancelled = True
        self.stop()

    def stop(self, grace_s: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> ManagedServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class Endpoint:
    """Where requests for one variant go, as ``started`` yields it."""

    base_url: str  # …/v1
    model: str  # the requests' ``model`` field
    api_key: str | None = None
    server: ManagedServer | None = None  # None: an endpoint quantgate did not start


@contextmanager
def started(backend, model: Path, log_path: Path, log: Callable[[str], None] = print,
            env: dict[str, str] | None = None, on_server: Callable[[ManagedServer], None] | None = None
            ) -> Iterator[Endpoint]:
    """The backend's server for ``model``, started and healthy for the ``with`` block and stopped after
    it (or the backend's running endpoint). Shared by ``serve`` and ``lmeval``. ``env``: variables set for
    this server only, over the backend's own (a study's ``server_env``, its GPU)."""
    if backend.serves_local_weights:
        from quantgate.io.modeldir import check_model_dir

        check_model_dir(model)  # safetensors only, no remote code: before a server spends minutes on it
    server = backend.server(Path(model), log_path)
    if env and server is not None:
        server.env = {**server.env, **env}
    api_key = backend.api_key()
    if server is None:
        yield Endpoint(backend.endpoint_url(), backend.model_name(Path(model)), api_key)
        return
    if on_server:
        on_server(server)  # before the start: whoever holds it may cancel the start from another thread
    log(f"starting {server.name} …")
    try:
        server.start()
        yield Endpoint(server.base_url, backend.model_name(Path(model)), api_key, server)
    finally:
        server.stop()


class SharedServer:
    """One variant's server, started on first use and kept for everything that needs it until
    :meth:`close` — a study's page runs and its lm-eval run share one start. Nothing is started
    when nothing asks for the endpoint (a resumed study with every request recorded).

    :meth:`prestart` starts it in a background thread while something else runs (a study starts the
    next variant's server during this one's lm-eval, never during page runs, whose speed it measures);
    :meth:`endpoint` then waits for it. ``starting(name, background)``, when given, is a context manager
    wrapped around the start (a study times it and shows it as a stage). One instance per variant;
    several may run side by side. ``serve_from(model)``: the folder the server is started on, asked at the start
    (a study serves a variant the machine's store holds from the store's folder: one path in every study, so
    vLLM's compile cache, which the served path is part of the key of, is hit by a second study)."""

    def __init__(self, backend, model: Path, log_path: Path, log: Callable[[str], None] = print,
                 starting: Callable[[str, bool], AbstractContextManager] | None = None,
                 env: dict[str, str] | None = None, layout=None,
                 serve_from: Callable[[Path], Path] | None = None):
        self.backend, self.model, self.log_path, self.log, self.starting = backend, Path(model), Path(log_path), log, starting
        self.serve_from = serve_from
        self.env = dict(env or {})  # for this server only (``started``'s env)
        self._server: ManagedServer | None = None  # once known, so close() can cancel a start under way
        self.layout = layout  # a study's ServerLayout, recorded in run.json by serve_variant
        self._stack = ExitStack()
        self._ep: Endpoint | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._release = threading.Event()
        self._error: BaseException | None = None
        self.starts = 0

    def _start(self, background: bool) -> None:
        name = f"{self.backend.name} server"
        with self.starting(name, background) if self.starting else nullcontext():
            model = self.serve_from(self.model) if self.serve_from else self.model
            self._ep = self._stack.enter_context(started(self.backend, model, self.log_path, self.log, self.env,
                                                              on_server=self._set_server))
        self.starts += 1

    def _set_server(self, server: ManagedServer) -> None:
        self._server = server

    def prestart(self) -> None:
        """Start the server in a background thread (no-op when started or starting)."""
        if self._ep is not None or self._thread is not None:
            return

        def run() -> None:
            try:
                self._start(True)
            except BaseException as e:  # noqa: BLE001 — handed to whoever asks for the endpoint
                self._error = e
            finally:
                self._ready.set()
            # The server dies with the thread that started it (PR_SET_PDEATHSIG follows the parent
            # thread, not the process), so this thread lives until the server is stopped.
            self._release.wait()

        self._thread = threading.Thread(target=run, name=f"start {self.model.name}", daemon=True)
        self._thread.start()

    def wait_started(self) -> None:
        """Wait for a start under way to end, healthy or failed (its error is raised by :meth:`endpoint`)."""
        if self._thread is not None:
            self._ready.wait()

    def endpoint(self) -> Endpoint:
        if self._thread is not None:
            self._ready.wait()
        if self._error is not None:
            err, self._error = self._error, None
            raise err
        if self._ep is None:
            self._start(False)
        return self._ep

    def close(self) -> None:
        if self._thread is not None:
            if not self._ready.is_set() and self._server is not None:
                self._server.cancel()  # nobody will use it: end its start now, not at its startup timeout
            self._ready.wait()
        self._ep = None
        try:
            self._stack.close()
        finally:
            if self._thread is not None:
                self._release.set()
                self._thread.join()
                self._thread = None

    def __enter__(self) -> SharedServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
