"""Sections other packages add to a study's report (a tune's trials table and heat map): each registers
two functions of the study folder — its report.md lines and its report.html blocks (Markup, already
escaped) — and ``write_reports`` places them before the provenance line. The report imports none of them:
``quantgate tune`` registers its own (``quantgate.tune.report``), and so the CLI, when it starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Section:
    markdown: Callable[[Path], list[str]]
    html: Callable[[Path], list]


_SECTIONS: dict[str, Section] = {}


def register_section(name: str, markdown: Callable[[Path], list[str]], html: Callable[[Path], list]) -> None:
    """Add (or replace) the section ``name``; it renders nothing for a study folder it has nothing for."""
    _SECTIONS[name] = Section(markdown, html)


def markdown(out: Path) -> list[str]:
    return [line for s in _SECTIONS.values() for line in s.markdown(out)]


def html(out: Path) -> list:
    return [block for s in _SECTIONS.values() for block in s.html(out)]
