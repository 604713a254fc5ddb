"""Script-aware words for wer and bow_f1: a Chinese or Japanese page is counted by character (so a nearly
right page has a small wer and a high bow_f1, where splitting on spaces gave wer above 1 and bow_f1 0),
and text in spaced scripts splits exactly as before."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantgate.scoring.metrics import get_metric
from quantgate.scoring.tokenize import words


def m(name, pred, truth):
    return get_metric(name).fn(pred, truth)


# A Chinese page (OmniDocBench-like notes), and the same page as a model might return it: wrapped at other
# places, with spaces around Latin text, one character wrong (气→汽) and one missing (的).
ZH_TRUTH = ("（1）含义：是一个地方短时间里阴晴、风雨、冷热等大气状况。\n"
            "（2）特点：天气是经常变化的。天气预报是气象工作者通过对天气资料的分析，发布将要出现的天气状况。")
ZH_PRED = ("（1）含义：是一个地方短时间里阴晴、风雨、冷热等大汽状况。（2）特点：\n"
           "天气是经常变化的。 天气预报是气象工作者通过对天气资料的分析，发布将要出现天气状况。")

JA_TRUTH = "今日は良い天気ですね。明日も晴れるでしょう。\n週末には富士山に登る予定です。"
JA_PRED = "今日は良い天気ですね。 明日も晴れるでしよう。週末には富士山に登る予定です。"  # ょ→よ


def test_a_nearly_right_chinese_page_has_a_small_wer_and_a_high_bow_f1():
    wer, bow = m("wer", ZH_PRED, ZH_TRUTH), m("bow_f1", ZH_PRED, ZH_TRUTH)
    n = len(words(ZH_TRUTH))
    assert len(ZH_TRUTH.split()) == 2 and n > 60  # by character, not as two space-separated runs
    assert wer == pytest.approx(2 / n)  # one substitution, one deletion
    assert 0.97 < bow < 1.0


def test_a_nearly_right_japanese_page_has_a_small_wer_and_a_high_bow_f1():
    assert words("天気ですね。コーヒー") == ["天", "気", "で", "す", "ね", "。", "コ", "ー", "ヒ", "ー"]
    n = len(words(JA_TRUTH))
    assert m("wer", JA_PRED, JA_TRUTH) == pytest.approx(1 / n)
    assert 0.95 < m("bow_f1", JA_PRED, JA_TRUTH) < 1.0


def test_thai_is_counted_by_character_and_numbers_in_cjk_text_stay_whole():
    assert words("ภาษาไทย") == ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]
    assert words("2023年08月") == ["2023", "年", "08", "月"]


SPACED = list("abcXYZ019 éüßçñ,.;:!?()[]'\"-–—/\\|#*_") + ["\t", "\n", "  "] + list("Привет мир Ελλάδα 한국어 مرحبا")


@given(st.lists(st.sampled_from(SPACED), max_size=40).map("".join))
def test_spaced_scripts_split_as_before(text):
    assert words(text) == text.split()


def test_latin_scores_are_unchanged():
    assert m("wer", "the cat sat", "the cat sat down") == pytest.approx(1 / 4)
    assert m("wer", "Hello, world!", "Hello world") == 1.0  # punctuation stays with its word
    assert m("bow_f1", "a b c d", "a b") == pytest.approx(2 * 0.5 * 1 / 1.5)
