"""Formula CDM where its toolchain is missing: one clear error naming the Debian packages and the make target that
installs them (quantgate/scoring/omnidoc/cdm_render.py), never a silent fallback."""

import shutil

import pytest

from quantgate.errors import InputError
from quantgate.scoring.omnidoc import cdm_render


def test_a_machine_without_the_toolchain_is_told_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    # without XeTeX its LaTeX files cannot be looked for: the engine and Ghostscript are named
    assert cdm_render.missing_packages() == ["texlive-xetex", "ghostscript"]
    with pytest.raises(InputError) as e:
        cdm_render.require_toolchain()
    msg = str(e.value)
    assert "make setup-cdm" in msg and "texlive-xetex" in msg and "ghostscript" in msg
    assert "omnidoc15_formula_edit" in msg  # the labelled alternative, chosen by the user, not substituted


def test_only_ghostscript_missing_names_only_it(monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "gs" else real(name) or f"/usr/bin/{name}")
    monkeypatch.setattr(cdm_render.subprocess, "run", lambda cmd, **kw: type("R", (), {"stdout": "found\n"})())
    assert cdm_render.missing_packages() == ["ghostscript"]


def test_doctor_says_whether_formula_cdm_can_run(monkeypatch):
    from quantgate.commands.doctor import _cdm_toolchain

    monkeypatch.setattr(shutil, "which", lambda name: None)
    got = _cdm_toolchain()
    assert got["ready"] is False and got["missing"] == ["texlive-xetex", "ghostscript"]
    assert "make setup-cdm" in got["status"]


def test_overall_without_the_toolchain_is_not_computed_and_says_how_to_install(monkeypatch):
    from quantgate.scoring.omnidoc import v15

    monkeypatch.setattr(shutil, "which", lambda name: None)
    got = v15.overall({v15.TEXT: 0.3, v15.TEDS: 0.8}, {"p": "$$x$$"}, {"p": "$$x$$"})
    assert got.value is None and got.formula_cdm is None and got.why is not None
    assert "not computed" in got.why and "make setup-cdm" in got.why and "texlive-xetex" in got.why
