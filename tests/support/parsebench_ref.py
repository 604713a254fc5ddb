"""Loads upstream ParseBench's evaluation code from ../shared/reference/parsebench (its commit is named in the
folder) as the ``parse_bench`` package, to run as the oracle in differential tests.

Upstream needs Python >= 3.12: ``parse_bench/test_cases/parse_rule_schemas.py`` (imported by every rule module)
declares its unions with PEP 695 ``type X = ...`` statements, a syntax error on the 3.11 these machines run. A
meta-path finder serves every ``parse_bench.*`` module from the reference folder and rewrites each such
statement to a plain assignment (``X = ...``) before compiling. That is equivalent there because the module uses
``from __future__ import annotations`` and only reads the aliases as unions. The reference files themselves are
never edited, and nothing else is rewritten.

``load()`` installs the finder once and returns the ``parse_bench`` package; ``reference_missing_reason()`` is
the one skip reason when the reference is absent (tests/support/paths.py turns it into a failure in CI)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import types
from pathlib import Path

from tests.support.paths import SHARED, oracle_missing

REFERENCE = Path(os.environ.get("QUANTGATE_PARSEBENCH_REFERENCE") or SHARED / "reference" / "parsebench")
SOURCE = REFERENCE / "src"
PACKAGE = "parse_bench"

# a PEP 695 alias statement at the start of a line (no type parameters: upstream declares none)
_TYPE_ALIAS = re.compile(r"^type\s+([A-Za-z_]\w*)\s*=", re.MULTILINE)


def reference_missing_reason() -> str | None:
    return oracle_missing(SOURCE / PACKAGE / "evaluation" / "metrics" / "parse" / "rules_bag.py",
                          SOURCE / PACKAGE / "test_cases" / "parse_rule_schemas.py")


def rewrite(source: str) -> str:
    """``type X = ...`` → ``X = ...``; every other line untouched (line numbers are kept for tracebacks)."""
    return _TYPE_ALIAS.sub(r"\1 =", source)


class _Loader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data, path, *, _optimize=-1):  # type: ignore[override]
        text = importlib.util.decode_source(data) if isinstance(data, (bytes, bytearray)) else str(data)
        return compile(rewrite(text), path, "exec", dont_inherit=True, optimize=_optimize)

    def get_code(self, fullname):  # type: ignore[override]
        # no bytecode cache: the cached code would be the rewritten one under the reference's own name
        return self.source_to_code(self.get_data(self.get_filename(fullname)), self.get_filename(fullname))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[override]
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        base = SOURCE.joinpath(*fullname.split("."))
        if (base / "__init__.py").is_file():
            origin, search = base / "__init__.py", [str(base)]
        elif base.with_suffix(".py").is_file():
            origin, search = base.with_suffix(".py"), None
        else:
            return None
        spec = importlib.util.spec_from_file_location(
            fullname, origin, loader=_Loader(fullname, str(origin)), submodule_search_locations=search)
        return spec


_FINDER = _Finder()


def load() -> types.ModuleType:
    """The reference ``parse_bench`` package (the finder goes first on sys.meta_path, once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return importlib.import_module(PACKAGE)


# content-faithfulness rule types → upstream's class (imported directly: upstream's factory also imports the
# table rules, which need ``unidecode``, a package this project does not install)
CLASSES = {
    "missing_word_percent": "rules_bag.MissingWordPercentRule",
    "unexpected_word_percent": "rules_bag.UnexpectedWordPercentRule",
    "too_many_word_occurence_percent": "rules_bag.TooManyWordOccurencePercentRule",
    "missing_sentence_percent": "rules_bag.MissingSentencePercentRule",
    "unexpected_sentence_percent": "rules_bag.UnexpectedSentencePercentRule",
    "too_many_sentence_occurence_percent": "rules_bag.TooManySentenceOccurencePercentRule",
    "extra_content": "rules_bag.ExtraContentRule",
    "bag_of_digit_percent": "rules_bag.BagOfDigitPercentRule",
    "order": "rules_text.TextOrderRule",
    **{t: "rules_formatting.FormattingRule" for k in ("bold", "italic", "underline", "strikeout", "mark", "sup", "sub")
       for t in (f"is_{k}", f"is_not_{k}")},
    "mark_color": "rules_formatting.MarkColorRule",
    "is_latex": "rules_formatting.LatexRule",
    "is_code_block": "rules_formatting.CodeBlockRule",
    "is_title": "rules_formatting.TitleLevelRule",
    "title_hierarchy_percent": "rules_formatting.TitleHierarchyPercentRule",
    "is_header": "rules_formatting.PageSectionRule",
    "is_footer": "rules_formatting.PageSectionRule",
    "chart_data_point": "rules_chart.ChartDataPointRule",
}


def rule(data: dict):
    """Upstream's rule object for one content-faithfulness rule dict."""
    load()
    module, name = CLASSES[data["type"]].split(".")
    cls = getattr(importlib.import_module(f"{PACKAGE}.evaluation.metrics.parse.{module}"), name)
    schemas = importlib.import_module(f"{PACKAGE}.test_cases.parse_rule_schemas")
    return cls(schemas.coerce_parse_rule(data))


def score(data: dict, markdown: str) -> float:
    """Upstream's score of one rule on one output: its graded score, else 1/0 for pass/fail (as upstream's
    metric counts a rule that returns no score)."""
    out = rule(data).run(markdown)
    return float(out[2]) if len(out) == 3 else (1.0 if out[0] else 0.0)


def content_faithfulness(rules: list[dict], markdown: str) -> float | None:
    """Upstream's own evaluator on one page: its ``content_faithfulness`` value."""
    return page_metrics(rules, markdown).get("content_faithfulness")


def page_metrics(rules: list[dict], markdown: str, **case_fields) -> dict[str, float]:
    """Upstream's own evaluator (``ParseEvaluator.evaluate``) on one page: every metric it reports, by name
    (``content_faithfulness``, ``semantic_formatting``, ``rule_<type>_pass_rate``, ``grits_trm_composite``, ...).
    ``case_fields`` go to its ``ParseTestCase`` (``expected_markdown`` and the table settings).

    Its module imports the table rules, which import ``unidecode`` (not installed here); a stand-in that raises is
    put in its place only when the real one is missing, so a table rule reaching it fails the test rather than
    scoring wrongly. The LLM post-normalization (chart rules only) is switched off by its own setting."""
    import datetime

    if "unidecode" not in sys.modules and importlib.util.find_spec("unidecode") is None:
        def _absent(_text: str) -> str:
            raise RuntimeError("unidecode is not installed: upstream's table rules cannot run here")
        sys.modules["unidecode"] = types.SimpleNamespace(unidecode=_absent)  # type: ignore[assignment]
    os.environ["LLAMACLOUD_BENCH_LLM_NORMALIZATION"] = "off"
    load()
    evaluator = importlib.import_module(f"{PACKAGE}.evaluation.evaluators.parse")
    pio = importlib.import_module(f"{PACKAGE}.schemas.pipeline_io")
    output = importlib.import_module(f"{PACKAGE}.schemas.parse_output")
    cases = importlib.import_module(f"{PACKAGE}.test_cases.schema")
    now = datetime.datetime.now()
    request = pio.InferenceRequest(example_id="page", source_file_path="page.pdf", product_type="parse")
    result = pio.InferenceResult(
        request=request, pipeline_name="quantgate", product_type="parse", raw_output={}, started_at=now,
        completed_at=now, latency_in_ms=0,
        output=output.ParseOutput(example_id="page", pipeline_name="quantgate", markdown=markdown))
    case = cases.ParseTestCase(test_id="g/page", group="g", file_path="page.pdf", test_rules=rules,
                               **case_fields)
    return {m.metric_name: m.value for m in evaluator.ParseEvaluator().evaluate(result, case).metrics}


def rule_parity(rules, md, parse, problem, ours_score):
    """Each rule of a page scored by upstream and by ours (``parse`` builds our rule, ``problem`` says why upstream
    would refuse it, ``ours_score`` scores it): the number that agree (both refuse, or equal scores), how many of
    those passed, the disagreements (rule, ours, theirs) and the rules both could score (for the page's score)."""
    agree, passed, differ, kept = 0, 0, [], []
    for data in rules:
        try:
            theirs: float | None = score(data, md)
        except ValueError:
            theirs = None
        rule = parse(data)
        ours = None if problem(rule) else ours_score(rule, md)
        if (ours is None) if theirs is None else (ours is not None and abs(ours - theirs) < 1e-12):
            agree += 1
            passed += bool(ours)
        else:
            differ.append((data, ours, theirs))
        if ours is not None:
            kept.append(data)
    return agree, passed, differ, kept
