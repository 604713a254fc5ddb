"""Studies: one YAML runs the whole flow for several variants, resumably.

``spec`` — the YAML schema and ``load_study``; ``run`` — the orchestration (``run_study``, the lock);
``verdicts`` — the study's verdicts, made the one way the study and the gate (``quantgate.gate``) share;
``lmeval`` — the lm-eval step and its verdicts; ``worst`` —
the worst pages a report shows; ``timings`` — ``timings.jsonl`` and the console stage of each step;
``init`` — ``quantgate init``, a study YAML written from a checkpoint and pages."""

from quantgate.study.run import run_study, study_lock
from quantgate.study.spec import Study, load_study

__all__ = ["Study", "load_study", "run_study", "study_lock"]
