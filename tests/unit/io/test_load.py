"""The one loader (quantgate.schema.load) and the files quantgate reads through it: every hostile content is one
DataError naming the file (and line), never a traceback, a hang or an unbounded read; a UTF-8 byte-order mark is
tolerated. Each case is fed to every reader: a record file (summary.json), a JSONL file (scores, pages.jsonl, a
checks file), a study YAML, a recipe, an attestation."""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.errors import DataError, QuantgateError
from quantgate.schema.load import BOM, MAX_DEPTH, load_json, parse_json, parse_yaml

DEEP_JSON = b"[" * 200_000 + b"]" * 200_000 + b"\n"
HUGE_INT = b'{"n": ' + b"9" * 5001 + b"}\n"


@contextmanager
def no_hang(seconds: int = 10):
    """A read that blocks (a FIFO opened for reading) fails the test instead of hanging it."""
    def boom(*_):
        raise TimeoutError("hung")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _readers(tmp_path: Path):
    """(name, function of a path) for every kind of file quantgate reads."""
    from quantgate.gate.attest import read_statement
    from quantgate.heldout.importer import ImportOptions, import_pages
    from quantgate.io.fileio import read_jsonl
    from quantgate.io.scores import read_scores
    from quantgate.recipes import load_recipe
    from quantgate.schema.base import read_record_file
    from quantgate.schema.summary import Summary
    from quantgate.study.spec import load_study

    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    from PIL import Image

    Image.new("RGB", (8, 8), "white").save(src / "a_pg1.png")
    return [
        ("summary.json", lambda p: read_record_file(Summary, p)),
        ("jsonl", lambda p: list(read_jsonl(p))),
        ("scores", read_scores),
        ("checks", lambda p: import_pages([src], tmp_path / "ps", ImportOptions(checks_file=p))),
        ("study", load_study),
        ("recipe", load_recipe),
        ("attestation", lambda p: read_statement(p, None)),
    ]


@pytest.mark.parametrize("content,needle", [
    (DEEP_JSON, f"nested more than {MAX_DEPTH} levels"),
    (HUGE_INT, "a number of "),
    (b'{"a": 1}\x00\n', "a NUL byte"),
    (b"\xff\xfe{\x00}\x00\n", "UTF-16"),
    (b"[" * 20_000 + b"\n", ""),  # YAML's flow sequence 20,000 deep (and broken JSON)
])
def test_hostile_content_is_one_data_error_in_every_reader(tmp_path, content, needle):
    for name, read in _readers(tmp_path):
        f = tmp_path / f"{name}.file"
        f.write_bytes(content)
        with pytest.raises(QuantgateError) as e:
            read(f)
        msg = str(e.value)
        assert str(f) in msg and needle in msg and "\n" not in msg, (name, msg)
        assert not (tmp_path / "ps").exists()


def test_the_limits_name_the_line():
    with pytest.raises(DataError, match=r"^f:3: a number of 5,001"):
        parse_json(b'{\n"a": 1,\n"n": ' + b"1" * 5001 + b"}", "f")
    with pytest.raises(DataError, match=r"^f:2: not valid JSON"):
        parse_json(b'{"a": 1,\n}', "f")
    with pytest.raises(DataError, match=r"^s\.yaml:2: not valid YAML"):
        parse_yaml(b"a: 1\n  b: [\n", "s.yaml")
    assert parse_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, "f") is not None  # the limit itself is allowed
    with pytest.raises(DataError, match="nested more than"):
        parse_json(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "f")


def test_a_yaml_alias_bomb_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    with pytest.raises(DataError, match="more than 10,000,000 values"):
        parse_yaml(bomb, "bomb.yaml")


def test_a_bom_is_tolerated(tmp_path):
    from quantgate.io.fileio import read_jsonl

    f = tmp_path / "x.json"
    f.write_bytes(BOM + b'{"a": 1}\n')
    assert load_json(f) == {"a": 1}
    f.write_bytes(BOM + b'{"a": 1}\n{"b": 2}\n')
    assert [o for _, o in read_jsonl(f)] == [{"a": 1}, {"b": 2}]
    assert parse_yaml(BOM + b"a: 1\n", "s") == {"a": 1}


def test_a_fifo_or_a_folder_is_refused_without_blocking(tmp_path):
    from quantgate.io.fileio import read_jsonl, sha256_file

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with no_hang():
        for read in (load_json, lambda p: list(read_jsonl(p)), lambda p: list(read_jsonl(p, repair_torn_tail=True)),
                     sha256_file):
            with pytest.raises(DataError, match="FIFO|not a regular file"):
                read(fifo)
        with pytest.raises(DataError, match="is a folder"):
            load_json(tmp_path)


# fuzz: any bytes, or a valid document with bytes changed, reach the readers as one QuantgateError or a value
_VALID = json.dumps({"schema_version": 1, "kind": "quantgate.summary", "a": [1, 2.5, {"b": None}], "s": "é"}).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(
    st.binary(max_size=300),
    st.tuples(st.integers(0, len(_VALID) - 1), st.binary(min_size=1, max_size=8)).map(
        lambda t: _VALID[:t[0]] + t[1] + _VALID[t[0] + len(t[1]):]),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                 lambda c: st.lists(c) | st.dictionaries(st.text(), c), max_leaves=20).map(
        lambda o: json.dumps(o).encode()),
))
def test_fuzzed_bytes_never_traceback(data):
    from quantgate.io.fileio import read_jsonl  # noqa: F401 (the JSONL split, below, is the reader's)
    from quantgate.schema.load import jsonl_objects

    for parse in (lambda b: parse_json(b, "f"), lambda b: parse_yaml(b, "f"), lambda b: list(jsonl_objects(b, "f"))):
        try:
            parse(data)
        except QuantgateError as e:
            assert str(e).startswith("f") and "\n" not in str(e)


def test_a_downloaded_models_json_is_read_under_the_limits(tmp_path):
    """A model folder is someone else's files: its config.json and each safetensors header go through the loader."""
    import struct

    from quantgate.io.modeldir import check_model_dir
    from quantgate.quantize.verify import read_safetensors_header

    header = b"[" * 200_000 + b"]" * 200_000
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(QuantgateError, match="safetensors header is not valid JSON.*nested more than"):
        read_safetensors_header(tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_bytes(DEEP_JSON)
    with pytest.raises(DataError, match=r"config\.json: nested more than"):
        check_model_dir(tmp_path, chat_template=False)


def _config_folder(tmp_path: Path, content: bytes) -> Path:
    (tmp_path / "m").mkdir(exist_ok=True)
    (tmp_path / "m" / "config.json").write_bytes(content)
    return tmp_path / "m" / "config.json"


def _tune_record(tmp_path: Path, content: bytes) -> Path:
    f = tmp_path / "o" / "tune" / "t" / "tune.json"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(content)
    return f


def _plain(name: str):
    def put(tmp_path: Path, content: bytes) -> Path:
        (tmp_path / name).write_bytes(content)
        return tmp_path / name
    return put


def _gzipped(tmp_path: Path, content: bytes) -> Path:
    import gzip

    (tmp_path / "trace.json.gz").write_bytes(gzip.compress(content))
    return tmp_path / "trace.json.gz"


def _family_readers():
    """(family, where its file goes, how quantgate reads it) for the readers beyond the record files: tune records,
    sensitivity files, a run's resume, a model's config.json (serving, tensor-parallel heads, KV memory, the
    quantized checkpoint's check), a profiler trace (plain and gzipped), a tune's user study."""
    from quantgate.quantize.verify import verify_checkpoint
    from quantgate.sensitivity.load import load_sensitivity
    from quantgate.serve.numerics import variant_formats
    from quantgate.serve.run import _resume
    from quantgate.speed.trace import load_trace
    from quantgate.study.heads import check_heads
    from quantgate.study.overlap import kv_bytes
    from quantgate.tune.report import load_tunes
    from quantgate.tune.study import load_user_study

    return [
        ("tune record", _tune_record, lambda f: load_tunes(f.parents[2])),
        ("sensitivity", _plain("sens.json"), load_sensitivity),
        ("run resume", _plain("run.json"), lambda f: _resume(None, f.parent, False)),  # read before it is compared
        ("config: numerics", _config_folder, lambda f: variant_formats(f.parent)),
        ("config: heads", _config_folder, lambda f: check_heads(f.parent, 2, [], "study.yaml")),
        ("config: kv memory", _config_folder, lambda f: kv_bytes(f.parent, [], None, 1)),
        ("config: checkpoint", _config_folder, lambda f: verify_checkpoint(f.parent, {}, {})),
        ("trace", _plain("trace.json"), load_trace),
        ("trace gzipped", _gzipped, load_trace),
        ("tune study", _plain("study.yaml"), load_user_study),
    ]


@pytest.mark.parametrize("content,needle", [
    (b"[" * 2 * MAX_DEPTH + b"]" * 2 * MAX_DEPTH + b"\n", f"nested more than {MAX_DEPTH} levels"),
    (HUGE_INT, "a number of "),
    (b'{"a": 1}\x00\n', "a NUL byte"),
    (b"\xff\xfe{\x00}\x00\n", "UTF-16"),
])
def test_every_reader_family_refuses_hostile_content_in_one_line(tmp_path, content, needle):
    for family, put, read in _family_readers():
        f = put(tmp_path, content)
        with no_hang(), pytest.raises(QuantgateError) as e:
            read(f)
        msg = str(e.value)
        assert str(f) in msg and needle in msg and "\n" not in msg, (family, msg)


def test_every_reader_family_reads_past_a_bom(tmp_path):
    """A byte-order mark is no parse error: what follows it is read, so any refusal is about the fields."""
    for family, put, read in _family_readers():
        f = put(tmp_path, BOM + b'{"kind": "x"}\n')
        try:
            with no_hang():
                read(f)
        except QuantgateError as e:
            assert not any(w in str(e) for w in ("not valid", "UTF", "byte-order", "NUL")), (family, str(e))


def test_a_parsebench_rule_given_as_text_is_parsed_under_the_limits(tmp_path):
    from quantgate.scoring.parsebench.dataset import read_rules

    f = tmp_path / "rules.jsonl"
    for body, needle in (("[" * 5_000 + "]" * 5_000, "nested more than"), ('{"n": ' + "9" * 5001 + "}", "a number of ")):
        f.write_text(json.dumps({"pdf": "a.pdf", "type": "order", "rule": body}) + "\n")
        with pytest.raises(DataError, match=rf"^{f}:1: 'rule' is text that is not JSON \(.*{needle}"):
            read_rules(f)


# text quantgate parses that is no file it loads: each with why it needs no limits of the loader
NOT_LOADED_FILES = {
    "quantgate/io/modeldir.py": "the chat-template sandbox's child and parent, each reading what the other wrote",
    "quantgate/scoring/olmocr_math.py": "KaTeX's results, written by quantgate's own page in the Chromium it started",
}


def test_nothing_parses_json_or_yaml_beside_the_one_reader():
    """A json.loads or yaml.safe_load of a file elsewhere would skip the limits (depth, number size, file size) that
    keep a hostile file to one line; a new reader goes through quantgate.schema.load."""
    import ast

    from tests.support.paths import REPO

    parsers = {("json", "loads"), ("json", "load"), ("yaml", "safe_load"), ("yaml", "load"), ("yaml", "full_load"),
               ("yaml", "unsafe_load")}
    found = []
    for f in sorted((REPO / "quantgate").rglob("*.py")):
        rel = f.relative_to(REPO).as_posix()
        if rel == "quantgate/schema/load.py" or rel in NOT_LOADED_FILES:
            continue
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            func = getattr(node, "func", None) if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                    (func.value.id, func.attr) in parsers:
                found.append(f"{rel}:{node.lineno}: {func.value.id}.{func.attr}")
    assert found == [], found
