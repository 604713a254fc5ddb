"""Command-line flags made from the study YAML's pydantic fields, so that a setting has one name, one
default, one bound and one description whether it is typed on the command line or written in a study
(as guidellm derives its CLI from its settings model). ``yaml_flag`` reads them off the ``Field``;
``flag_table`` lists every such flag for docs/study.md; ``deprecated`` keeps an old spelling working for
one release, with a warning, and refuses it beside its new name.

Written here rather than taken from a library: argparse has no pydantic bridge, and the kept CLI
libraries (click/typer-based ones) would replace the parser every verb already uses."""

from __future__ import annotations

import argparse
import sys
import types
import typing
from typing import Any

import annotated_types as at
from pydantic import BaseModel

from quantgate.commands._args import float_range, int_range

YAML_KEY = "yaml_key"  # set on an argparse action made from a field: "Study.slo_s"


def _metadata(field) -> list:
    """The field's constraints, also those of an optional field's inner type (``PositiveInt | None``)."""
    found = list(field.metadata)
    for arg in typing.get_args(field.annotation):
        if typing.get_origin(arg) is typing.Annotated:
            for m in typing.get_args(arg)[1:]:
                found += getattr(m, "metadata", [m])
    return found


def _bounds(field) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in _metadata(field):
        for name in ("ge", "gt", "le", "lt"):
            if isinstance(m, getattr(at, name.capitalize())):
                out[name] = getattr(m, name)
    return out


def _base(annotation) -> type:
    """int, float, or a Literal's values' type: the field's type, its Optional and Annotated layers removed."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _base(typing.get_args(annotation)[0])
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _base(args[0])
    return annotation


def field_type(model: type[BaseModel], key: str):
    """The argparse type that refuses what the field refuses (its ge/gt/le/lt), or None for text/choices."""
    field = model.model_fields[key]
    b, base = _bounds(field), _base(field.annotation)
    if base is int:
        lo = int(b["ge"]) if "ge" in b else int(b["gt"]) + 1 if "gt" in b else None
        hi = int(b["le"]) if "le" in b else int(b["lt"]) - 1 if "lt" in b else None
        return int_range(lo if lo is not None else -(2**63), hi)
    if base is float:
        lo_open = "gt" in b
        hi = b.get("le", b.get("lt"))
        return float_range(b.get("gt", b.get("ge", float("-inf"))), hi, lo_open=lo_open, hi_open="lt" in b)
    return None


def yaml_flag(parser: argparse.ArgumentParser, model: type[BaseModel], key: str, *aliases: str,
              default: Any = ..., default_says: str | None = None, help_extra: str = "") -> argparse.Action:
    """Add ``--<key with dashes>`` for ``model``'s field ``key``: its type and bound, its default (``default``
    overrides it, e.g. None where a verb falls back to something else, which ``default_says`` names) and its
    description as help. ``aliases`` are deprecated old spellings (see :func:`deprecated`)."""
    field = model.model_fields[key]
    if not field.description:
        raise TypeError(f"{model.__name__}.{key} has no description: a flag made from it would have no help")
    flag = "--" + key.replace("_", "-")
    value = field.get_default(call_default_factory=True) if default is ... else default
    shown = default_says or ("none" if value is None else f"{value:g}" if isinstance(value, float) else str(value))
    choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else None
    if aliases:
        help_extra += f"; {', '.join(aliases)}: its deprecated spelling"
    kw: dict[str, Any] = {"default": value, "dest": key,
                          # argparse formats help with %: a literal one (a 5% tail) is doubled
                          "help": f"{field.description}{help_extra} (default {shown}; YAML: {key})".replace("%", "%%")}
    if choices:
        kw["choices"] = choices
    else:
        kw["type"] = field_type(model, key)
    action = deprecated(parser, flag, *aliases, **kw)
    setattr(action, YAML_KEY, f"{model.__name__}.{key}")
    action.default_says = default_says  # type: ignore[attr-defined]
    return action


def _deprecated_use(namespace, old: str, new: str) -> None:
    # said once the command line has parsed (emit_deprecations): a refused command line shows its one error alone
    namespace.__dict__.setdefault("_deprecated", []).append((old, new))


def emit_deprecations(namespace) -> None:
    """One warning line per deprecated spelling the parsed command line used (the parser calls it)."""
    for old, new in namespace.__dict__.pop("_deprecated", []):
        print(f"quantgate: warning: {old} is deprecated, use {new} (the old spelling goes in the next release)",
              file=sys.stderr)


class _Spelling(argparse._StoreAction):
    """One spelling of a setting. An old one (``of``: the current name) warns; two spellings of one setting together
    are a usage error naming both (which value was meant cannot be guessed). Each spelling is its own action, so a
    bad value is refused naming the flag as it was typed."""

    def __init__(self, option_strings, dest, of: str | None = None, **kw):
        super().__init__(option_strings, dest, **kw)
        self.of = of
        self.deprecated_aliases = tuple(option_strings) if of else ()

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_spelled", {})
        prev = seen.get(self.dest)
        if prev is not None and prev != option_string:
            parser.error(f"{prev} and {option_string} are the same setting (one is the deprecated spelling of the "
                         "other); give it once")
        seen[self.dest] = option_string
        if self.of:
            _deprecated_use(namespace, option_string, self.of)
        super().__call__(parser, namespace, values, option_string)


def deprecated(parser: argparse.ArgumentParser, new: str, *old: str, **kw) -> argparse.Action:
    """``new`` as a flag, and each of ``old`` as a hidden deprecated spelling of it (same destination and type)."""
    action = parser.add_argument(new, action=_Spelling, **kw)
    for o in old:
        parser.add_argument(o, action=_Spelling, of=new, dest=action.dest, type=action.type, choices=action.choices,
                            metavar=action.metavar, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return action


class DeprecatedConst(argparse.Action):
    """An old on/off flag that now sets a value of a newer option (``compare --exact`` → ``--test exact``):
    it warns, and beside the newer option it is a usage error naming both."""

    def __init__(self, option_strings, dest, const=None, new: str = "", **kw):
        super().__init__(option_strings, dest, nargs=0, const=const, **kw)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_spelled", {})
        prev = seen.get(self.dest)
        if prev is not None and prev != option_string:
            parser.error(f"{prev} and {option_string} both choose {self.new.split()[0]}; give it once, as {self.new}")
        seen[self.dest] = option_string
        _deprecated_use(namespace, option_string, self.new.replace("VALUE", str(self.const)))
        setattr(namespace, self.dest, self.const)


def walk(parser: argparse.ArgumentParser, prefix: str = ""):
    """(verb path, sub-parser) for every sub-parser below ``parser``: ``("pages import", p)``, …"""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                yield path, sub
                yield from walk(sub, path)


def _models() -> dict[str, type[BaseModel]]:
    from quantgate.schema.study import LmEvalSpec, Study, SynthPages

    return {"Study": Study, "SynthPages": SynthPages, "LmEvalSpec": LmEvalSpec}


def describe_verbs(parser: argparse.ArgumentParser) -> None:
    """A verb added with a one-line ``help`` but no ``description`` gets that line as its description, so its own
    ``--help`` says what it does too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            said = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                if not sub.description and said.get(name):
                    sub.description = said[name][0].upper() + said[name][1:] + "."
                describe_verbs(sub)


def flag_table(parser: argparse.ArgumentParser) -> str:
    """The markdown table of every flag made from a study field: flag, verbs, YAML key, default, what it accepts."""
    from pydantic_core import PydanticUndefined

    rows: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
    for verb, sub in walk(parser):
        for a in sub._actions:
            key = getattr(a, YAML_KEY, None)
            if key:
                rows.setdefault((a.option_strings[0], key), []).append((verb, getattr(a, "default_says", None)))
    lines = ["| flag | verbs | YAML key | default | accepts |", "|---|---|---|---|---|"]
    for (flag, key), verbs in sorted(rows.items()):
        model_name, field_key = key.split(".")
        model = _models()[model_name]
        field = model.model_fields[field_key]
        default = field.get_default(call_default_factory=True)
        shown = "required" if default is PydanticUndefined else "none" if default is None else f"{default}"
        shown += "".join(f"; `{verb}`: {says}" for verb, says in verbs if says)
        t = field_type(model, field_key)
        accepts = getattr(t, "rule", None) or " / ".join(map(str, typing.get_args(field.annotation)))
        yaml_key = field_key if model_name == "Study" else f"{_PATH[model_name]}.{field_key}"
        lines.append(f"| `{flag}` | {', '.join(v for v, _ in verbs)} | `{yaml_key}` | {shown} | {accepts} |")
    return "\n".join(lines) + "\n"


_PATH = {"SynthPages": "pages.synth", "LmEvalSpec": "lm_eval"}  # where a model other than Study sits in the YAML
