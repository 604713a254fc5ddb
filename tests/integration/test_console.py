"""The console of long commands — one line per stage (a bar on a terminal, plain lines
otherwise) — and the capture of everything else (Python warnings, prints, loguru-style writes to the
saved sys.stdout, child processes) into the log file."""

import io
import subprocess
import sys
import textwrap

from quantgate.io.console import Console


def test_plain_console_writes_one_line_per_stage_and_no_carriage_returns():
    term, log = io.StringIO(), io.StringIO()
    c = Console(term, log, tty=False, interval_s=0)
    with c.stage("quantize fp8", None) as s:
        s.set_note("calibrating on 4 page(s)")
    with c.stage("fp8: pages at concurrency 1", 32) as s:
        for _ in range(32):
            s.advance()
    c.detail("starting transformers serve …")  # a stage's message: the log only
    c.detail("warning: the chat template raised")  # a warning: shown
    out = term.getvalue()
    assert "\r" not in out
    lines = out.splitlines()
    assert lines[0].startswith("quantize fp8: calibrating on 4 page(s), ") and lines[0].endswith(" s")
    assert lines[1].startswith("fp8: pages at concurrency 1: 32/32 pages, ")
    assert lines[2] == "warning: the chat template raised" and len(lines) == 3
    assert "starting transformers serve" in log.getvalue() and "32/32 pages" in log.getvalue()


def test_plain_console_reports_progress_of_a_long_stage_periodically():
    import time

    term = io.StringIO()
    c = Console(term, None, tty=False, interval_s=0.05)
    with c.stage("lm-eval", None, unit="request") as s:
        s.advance(3)
        time.sleep(0.3)
    lines = term.getvalue().splitlines()
    assert len(lines) >= 3 and all(x.endswith(" …") for x in lines[:-1]) and not lines[-1].endswith(" …")
    assert lines[-1].startswith("lm-eval: 3 requests, ")


def test_terminal_console_draws_one_bar_per_stage_and_failed_stages_say_so():
    term = io.StringIO()
    c = Console(term, None, tty=True)
    try:
        with c.stage("bf16: pages at concurrency 1", 4) as s:
            s.advance(2)
            raise RuntimeError("server died")
    except RuntimeError:
        pass
    out = term.getvalue()
    assert "\r" in out and "2/4" in out and out.rstrip().endswith("failed]")  # a tqdm bar redrawn in place


def test_captured_output_sends_third_party_output_to_the_log(tmp_path):
    """Python warnings, prints, a handler that kept the original sys.stdout (loguru does), and a child
    process all land in the log; the terminal gets the console's lines only."""
    code = textwrap.dedent(f"""
        import os, subprocess, sys, warnings
        from pathlib import Path
        saved = sys.stdout  # as a logging library keeps it from import time
        from quantgate.io.console import captured_output
        with captured_output(Path({str(tmp_path / 'study.log')!r})) as c:
            c.line("stage one: 1.0 s")
            warnings.warn("a library warning")
            print("a print")
            saved.write("No accelerator available!\\n")
            os.write(2, b"raw fd 2\\r progress\\r")
            subprocess.run([sys.executable, "-c", "print('from a child')"])
            c.line("stage two: 2.0 s")
        print("the verdict table")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["stage one: 1.0 s", "stage two: 2.0 s"]
    assert r.stdout == "the verdict table\n"
    log = (tmp_path / "study.log").read_text()
    for s in ("a library warning", "a print", "No accelerator available!", "raw fd 2", "from a child", "stage two"):
        assert s in log


def test_captured_output_names_the_log_after_a_failure(tmp_path):
    code = textwrap.dedent(f"""
        from pathlib import Path
        from quantgate.io.console import captured_output
        try:
            with captured_output(Path({str(tmp_path / 'study.log')!r})) as c:
                print("detail before the failure")
                raise ValueError("boom")
        except ValueError:
            print("caught")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout == "caught\n" and f"full log, third-party output included, is in {tmp_path / 'study.log'}" in r.stderr
    assert "detail before the failure" in (tmp_path / "study.log").read_text()


def test_verbose_shows_everything(tmp_path):
    code = textwrap.dedent(f"""
        import subprocess, sys
        from pathlib import Path
        from quantgate.io.console import captured_output
        with captured_output(Path({str(tmp_path / 'study.log')!r}), verbose=True) as c:
            c.line("stage one: 1.0 s")
            c.detail("calibrating on 8 page(s)")
            subprocess.run([sys.executable, "-c", "import sys; print('from a child', file=sys.stderr)"])
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["stage one: 1.0 s", "calibrating on 8 page(s)", "from a child"]
    assert "calibrating on 8 page(s)" in (tmp_path / "study.log").read_text()
