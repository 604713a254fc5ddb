"""Sensitivity: how much each layer group is hurt by each format on the user's own pages
(``analyze``), and the per-group format choice that hurts least under a size, bits or speed
budget (``recommend``), written as an ordinary recipe. Heavy imports happen inside functions."""

from quantgate.schema.sensitivity import SensitivityFile
from quantgate.sensitivity.budget import parse_size
from quantgate.sensitivity.load import check_model, load_sensitivity


def analyze(*args, **kwargs):
    from quantgate.sensitivity.analyze import analyze as _analyze

    return _analyze(*args, **kwargs)


__all__ = ["SensitivityFile", "analyze", "check_model", "load_sensitivity", "parse_size"]
