"""An error quotes keys and values from the files it names; whatever they hold, the user reads one line."""

from hypothesis import given
from hypothesis import strategies as st

from quantgate.errors import one_line


@given(st.text())
def test_any_text_stays_on_one_line(text):
    assert len(one_line(text).splitlines()) <= 1


@given(st.text().filter(lambda t: len((t + "x").splitlines()) == 1))  # no break anywhere, by Python's own rule
def test_text_without_a_line_break_is_unchanged(text):
    assert one_line(text) == text


def test_each_break_is_escaped_visibly():
    assert one_line("study.margins.\r") == "study.margins.\\x0d"
    assert one_line("a\x1eb\u2028c") == "a\\x1eb\\u2028c"
