"""``quantgate tune``: the loop from a sensitivity file and a budget to a recipe whose verdicts on the
study's held-out pages are all within noise. ``policy`` decides what follows a trial (pure);
``loop`` runs trials and records them; ``study`` writes and reads each trial's study; ``records``
types the files."""

from quantgate.schema.tune import Trial, TuneFile
from quantgate.tune.loop import Tuner, tune

__all__ = ["Trial", "TuneFile", "Tuner", "tune"]
