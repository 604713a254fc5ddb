"""What a backend is, and the registry that finds them.

A backend says how to get an OpenAI-compatible server for a variant: a command quantgate starts
(``transformers serve``, ``vllm serve``, any server with a start command) or an endpoint that already
runs. Each one is a subclass of :class:`Backend` in its own module of this package, registered by
name with :func:`register_backend`, with its settings declared once as a pydantic
:class:`BackendOptions` model. Everything else is derived from that model: the ``--flags`` of
``quantgate serve`` / ``quantgate lmeval`` and the ``backend:`` block of a study YAML
(``quantgate.serve.backends.derive``). Modules of this package are discovered by importing each
one (as lm-eval's ``@register_model`` and guidellm's ``Backend.register`` are found by import), so
a file dropped in here registers itself.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from quantgate.errors import InputError
from quantgate.schema.run import EngineSettings, KernelCounts, LogFacts

if TYPE_CHECKING:
    from quantgate.schema.run import RunNumerics
    from quantgate.serve.server import ManagedServer


class BackendOptions(BaseModel):
    """A backend's settings. Each field becomes one CLI flag (``--field-name``, or the field's
    ``json_schema_extra={"flag": ...}``) and one key of a study's ``backend:`` block; its
    ``description`` is the flag's help, its constraints (``gt=0``, a pattern) are checked for both.
    No float option takes nan or inf: an infinite timeout is a wait without end."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Whether the backend starts a server process of its own (ServerArgs): only then can a study pass it a
    # variant's server_args and server_env, or place it on a GPU.
    starts_server: ClassVar[bool] = False

    def takes_most_of_a_gpu(self) -> bool:
        """Whether one server takes most of a GPU's memory as configured (two on one GPU: the second cannot start)."""
        return False

    def resolved(self, base: Path, out: Path) -> BackendOptions:
        """The options with the paths a study gives relative to itself resolved (``base``: the study file's
        folder; ``out``: its output folder), for options that hold one (vLLM's compile cache)."""
        return self

    @field_validator("*", mode="before")
    @classmethod
    def _number_not_bool(cls, v: Any, info: ValidationInfo) -> Any:
        # a study's YAML reads yes/no/on/off as booleans, which pydantic would take as 1 and 0
        ann = cls.model_fields[info.field_name].annotation
        if isinstance(v, bool) and bool not in (ann, *get_args(ann)):
            raise ValueError("expected a number or text, not true/false")
        return v


class ServerArgs(BackendOptions):
    """Options of every backend that starts its own server process."""

    starts_server: ClassVar[bool] = True

    extra_args: list[str] = Field(default_factory=list, json_schema_extra={"flag": "--server-arg"},
                                  description="extra argument for the server command (repeatable)")


class Backend(ABC):
    """One way to get an OpenAI-compatible server for a variant. Subclasses set ``Options`` and
    implement ``server``; the rest has defaults a server started from the variant folder fits."""

    name: ClassVar[str] = ""  # set by @register_backend
    Options: ClassVar[type[BackendOptions]] = BackendOptions
    # Environment variables that change this server's numerics, speed or caching: recorded when set.
    engine_env: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: BackendOptions | None = None, **fields: Any):
        self.options = options if options is not None else self.Options(**fields)

    @abstractmethod
    def server(self, model: Path, log_path: Path) -> ManagedServer | None:
        """The server for ``model`` (not started), or ``None`` when an endpoint already runs."""

    def endpoint_url(self) -> str:
        """Base URL (``…/v1``) of the running endpoint, for backends whose ``server`` is ``None``."""
        raise NotImplementedError(f"backend {self.name} starts its own server")

    @property
    def serves_local_weights(self) -> bool:
        """The server loads the variant folder: it is checked (safetensors, no remote code) and its
        weights fingerprinted. False for an endpoint that serves a model by name."""
        return True

    def model_name(self, model: Path) -> str:
        """The ``model`` field of requests."""
        return str(model)

    def api_key(self) -> str | None:
        return None

    def server_version(self) -> str | None:
        """Known before the start (an installed package); a version read from the log goes in ``read_log``."""
        return None

    def notes(self, model: Path) -> list[str]:
        """Caveats for ``run.json``: what this backend's numbers do and do not measure."""
        return []

    def engine_settings(self, text: str) -> EngineSettings | None:
        """The settings that shape this server's speed, from the log text of one start (and the options it
        was started with); ``None`` when the backend knows none. Environment and start seconds are added by
        the caller, which saw the start."""
        return None

    def numerics(self, model: Path, kernels: KernelCounts) -> RunNumerics | None:
        """What this backend computes per quantized format of ``model`` (weights-only or
        weights+activations), from measurements only (``quantgate.serve.numerics``); ``kernels`` are
        the ones read from this start's log. ``None`` when the model is not a folder quantgate reads."""
        if not self.serves_local_weights:
            return None
        from quantgate.serve.numerics import variant_numerics

        return variant_numerics(model, self.name, kernels=kernels)

    def read_log(self, text: str) -> LogFacts:
        """Facts the server wrote to its log, for ``run.json`` (its version, the kernels it chose, notes)."""
        return LogFacts()

    def preemptions(self, base_url: str) -> int | None:
        """How many requests the running server has preempted so far (a KV cache too small for the concurrency
        makes an engine evict a request and recompute it later), or None when it publishes no count; the run
        records the increase over each level."""
        return None


_REGISTRY: dict[str, type[Backend]] = {}
_discovered = False


def register_backend(name: str):
    """Class decorator: make a :class:`Backend` subclass available as ``--backend NAME`` and
    ``backend: {name: NAME}``."""

    def deco(cls: type[Backend]) -> type[Backend]:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(f"@register_backend({name!r}) decorates a Backend subclass, not {cls!r}")
        old = _REGISTRY.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"backend {name!r} is registered twice: {old.__module__}.{old.__qualname__} "
                             f"and {cls.__module__}.{cls.__qualname__}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def discover() -> None:
    """Import every module of this package once, so each registers its backends."""
    global _discovered
    if _discovered:
        return
    pkg = sys.modules[__package__]  # imported before this module, always
    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{__package__}.{mod.name}")
    _discovered = True


def registered() -> dict[str, type[Backend]]:
    """Name → backend class, every module of the package imported."""
    discover()
    return dict(sorted(_REGISTRY.items()))


def get_backend(name: str) -> type[Backend]:
    reg = registered()
    if name not in reg:
        raise InputError(f"unknown backend {name!r}; known backends: {', '.join(reg)}")
    return reg[name]


def flag_of(options: type[BaseModel], field: str) -> str:
    """The command-line flag of an option field: ``--field-name`` unless it says otherwise."""
    extra = options.model_fields[field].json_schema_extra
    return extra["flag"] if isinstance(extra, dict) and "flag" in extra else "--" + field.replace("_", "-")


def option_error(backend: str, e: ValidationError, name_of=lambda field: field) -> InputError:
    """One line for the first invalid option; ``name_of`` maps a field to how the user wrote it."""
    err = e.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else "(options)"
    return InputError(f"backend {backend}: {name_of(field)}: {err['msg']}")


def make_backend(name: str, **options: Any) -> Backend:
    """A backend by name, its options validated (one clear error naming the option)."""
    cls = get_backend(name)
    try:
        return cls(**options)
    except ValidationError as e:
        raise option_error(name, e, lambda f: f"{f} ({flag_of(cls.Options, f)})"
                           if f in cls.Options.model_fields else f) from None
