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
