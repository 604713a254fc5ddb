"""``attestation.intoto.json`` (``quantgate gate --sign``): the predicate of the in-toto Statement v1 that a
signed verdict carries, as ``quantgate verify`` reads it (``quantgate.gate.attest`` writes and checks it).

These models ignore unknown fields rather than refusing them: the statement is in-toto's format, whose parsing
rules say a consumer ignores fields it does not know, and its version is its ``predicateType``
(``.../verdict/v1``), not a ``schema_version``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# model-signing's default hashing config ignores these (hashing.Config); nothing else is left out. Here, not in
# gate.attest, because gate.check leaves them out of a variant folder too and gate.attest imports gate.check.
GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")


class _InToto(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Resource(_InToto):
    """One file of a signed variant folder: OpenSSF model-signing's resource descriptor."""

    name: str = Field(min_length=1)  # the path inside the folder, POSIX separators
    algorithm: str
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")


class SignedModel(_InToto):
    """One variant folder of the predicate: its files, whose root digest is the statement's subject."""

    name: str
    path: str  # relative to the study folder, as summary.json records it
    resources: list[Resource]


class VariantOutcome(_InToto):
    """A checked variant's own outcome under the gate's family rule (0 PASS, 1 FAIL, 2 UNDECIDED)."""

    exit_code: int = Field(ge=0, le=2)
    outcome: str
    verdicts: int = Field(ge=0)


class Scope(_InToto):
    """What the signed gate checked: a signature covers these variants (and the baseline) and nothing else."""

    baseline: str
    variants: dict[str, VariantOutcome]
    metrics: list[str]
    lmeval: bool


class VerdictPredicate(_InToto):
    """The predicate fields ``verify`` reads."""

    study: dict[str, Any]  # name, summary, digest of summary.json
    gate: dict[str, Any]  # exit_code, outcome, lines, the gate's options
    scope: Scope | None = None  # absent in attestations signed before the scope was stated
    models: list[SignedModel]
    created: str | None = None  # UTC, ISO 8601
