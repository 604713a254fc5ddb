"""Everything a backend's options model implies, so no other file lists them again:

- ``add_backend_flags(parser)`` / ``backend_from_args(args, variant)``: ``--backend NAME`` plus one
  flag per option field of every registered backend (a field two backends share is one flag), for
  every verb that starts a server;
- ``study_backend_type()``: the study YAML's ``backend:`` block, a union discriminated on ``name``
  (missing ``name``: ``transformers``), each member that backend's options with extra keys refused.
"""

from __future__ import annotations

import argparse
import types
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import ConfigDict, Discriminator, Tag, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from quantgate.errors import InputError, UsageError
from quantgate.serve.backends.base import Backend, BackendOptions, flag_of, get_backend, option_error, registered

DEFAULT_BACKEND = "transformers"
_DEST = "backend_option__"  # argparse dest prefix: a backend field never collides with a verb's own


def summary(cls: type[Backend]) -> str:
    """A backend's one-line description: the first line of its docstring."""
    return (cls.__doc__ or cls.name).strip().splitlines()[0].rstrip(".")


def _unwrap_optional(tp):
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _argparse_kwargs(tp, flag: str, infos: dict[str, FieldInfo]) -> dict[str, Any]:
    tp = _unwrap_optional(tp)
    if tp is bool:
        return {"action": argparse.BooleanOptionalAction}
    if tp is str:
        return {"type": tp, "metavar": "TEXT"}
    if tp in (int, float):
        return {"type": _number_type(flag, tp, infos), "metavar": "N" if tp is int else "X"}
    if get_origin(tp) is list and get_args(tp) in ((str,), (int,), (float,)):
        item = get_args(tp)[0]
        return {"action": "append", "type": item if item is str else _number_type(flag, item, {}), "metavar": "ARG"}
    if get_origin(tp) is Literal:
        return {"choices": list(get_args(tp))}
    raise TypeError(f"backend option type {tp!r} has no command-line form (use bool, int, float, str, list or Literal)")


def _number_type(flag: str, tp: type, infos: dict[str, FieldInfo]):
    """The argparse type of a numeric option: the number, checked against the field's own constraints
    (``gt``, ``le``; finite — ``BackendOptions`` refuses nan and inf) while the command line is parsed,
    before any server starts. A field several backends share passes if one of them accepts it;
    ``backend_from_args`` then checks it against the chosen backend."""
    adapters = [TypeAdapter(Annotated[(tp, *i.metadata)] if i.metadata else tp, config=ConfigDict(allow_inf_nan=False))
                for i in infos.values()] or [TypeAdapter(tp, config=ConfigDict(allow_inf_nan=False))]

    def parse(s: str):
        try:
            v = tp(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s[:40]!r} is not {'an integer' if tp is int else 'a number'}") from None
        errors = []
        for ta in adapters:
            try:
                return ta.validate_python(v)
            except ValidationError as e:
                errors.append(e.errors()[0]["msg"])
        raise argparse.ArgumentTypeError(f"{s[:40]!r}: {errors[0].lower()}")

    parse.__name__ = parse.__qualname__ = f"{flag[2:].replace('-', '_')}_value"
    return parse


def _default_text(f: FieldInfo) -> str | None:
    if f.default_factory is not None:
        return None
    if f.is_required():
        return "required"
    return None if f.default in (None, False) else f"default {f.default}"


@cache
def backend_flags() -> dict[str, dict[str, Any]]:
    """field → {flag, annotation, backends: {name: FieldInfo}}, over every registered backend. Two
    backends that share a field name share its flag, so they must agree on its type."""
    flags: dict[str, dict[str, Any]] = {}
    for name, cls in registered().items():
        for field, info in cls.Options.model_fields.items():
            entry = flags.setdefault(field, {"flag": flag_of(cls.Options, field), "annotation": info.annotation,
                                             "backends": {}})
            if entry["annotation"] != info.annotation or entry["flag"] != flag_of(cls.Options, field):
                other = next(iter(entry["backends"]))
                raise TypeError(f"backend option {field!r}: {name} declares {info.annotation} "
                                f"({flag_of(cls.Options, field)}), {other} {entry['annotation']} ({entry['flag']})")
            entry["backends"][name] = info
    return flags


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """``--backend`` and every backend's options, as one help group."""
    names = list(registered())
    g = parser.add_argument_group("backend", "the server to use and its options; a flag applies only to the "
                                  "backends named in [brackets] (docs/extending.md: adding a backend)")
    g.add_argument("--backend", default=DEFAULT_BACKEND, choices=names,
                   help=f"{' | '.join(names)} (default {DEFAULT_BACKEND}): " + "; ".join(
                       f"{n}: {summary(cls)}" for n, cls in registered().items()).replace("%", "%%"))
    for field, e in backend_flags().items():
        infos: dict[str, FieldInfo] = e["backends"]
        first = next(iter(infos.values()))
        defaults = {n: _default_text(i) for n, i in infos.items()}
        if len(set(defaults.values())) == 1:
            dflt = next(iter(defaults.values()))
            where = f"[{', '.join(infos)}{'; ' + dflt if dflt else ''}]"
        else:
            where = "[" + "; ".join(f"{n}{': ' + d if d else ''}" for n, d in defaults.items()) + "]"
        text = f"{first.description or field} {where}".replace("%", "%%")
        g.add_argument(e["flag"], dest=_DEST + field, default=None, help=text,
                       **_argparse_kwargs(e["annotation"], e["flag"], infos))


def backend_from_args(a: argparse.Namespace, variant: str | None = None) -> Backend:
    """The backend ``add_backend_flags`` described, from the parsed flags the user gave. ``variant``
    fills a ``model`` option left unset (an endpoint serves a model by the name on the command line)."""
    cls = get_backend(a.backend)
    given = {k[len(_DEST):]: v for k, v in vars(a).items() if k.startswith(_DEST) and v is not None}
    fields = backend_flags()
    wrong = [f for f in given if f not in cls.Options.model_fields]
    if wrong:
        f = wrong[0]
        raise UsageError(f"{fields[f]['flag']} is not an option of backend {a.backend} "
                         f"(it is for: {', '.join(fields[f]['backends'])})")
    if variant is not None and "model" in cls.Options.model_fields and "model" not in given:
        given["model"] = variant
    try:
        return cls(**given)
    except ValidationError as e:
        raise option_error(a.backend, e, lambda f: fields[f]["flag"] if f in fields else f) from None


def _tag(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("name", DEFAULT_BACKEND)
    return getattr(value, "name", DEFAULT_BACKEND)


@cache
def study_backend_specs() -> dict[str, type[BackendOptions]]:
    """Per registered backend, its options plus ``name: Literal[NAME]``: one member of the union."""
    return {name: create_model(f"{cls.__name__}Spec", __base__=cls.Options, __doc__=cls.Options.__doc__,
                               name=(Literal[name], name))
            for name, cls in registered().items()}


@cache
def study_backend_type():
    """The type of a study's ``backend:``: a union of ``study_backend_specs()`` told apart by ``name``."""
    members = tuple(Annotated[spec, Tag(name)] for name, spec in study_backend_specs().items())
    return Annotated[Union[members], Discriminator(_tag)]  # noqa: UP007 — built at run time


def default_study_backend() -> BackendOptions:
    return study_backend_specs()[DEFAULT_BACKEND]()


def backend_from_spec(spec: BackendOptions, extra_args: list[str] = ()) -> Backend:
    """The backend a study's ``backend:`` block describes; ``extra_args`` (a variant's
    ``server_args``) are appended to the block's own."""
    opts = spec.model_dump(exclude={"name"})
    if extra_args:
        if not spec.starts_server:
            raise InputError(f"backend {spec.name}: a variant's server_args need a backend that starts a server")
        opts["extra_args"] = list(opts["extra_args"]) + list(extra_args)
    return get_backend(spec.name)(**opts)
