"""Paragraphs into sentences: Chinese and English ends, what ends none, joining translations."""

import pytest

from attnmt.data.corpus import normalize
from attnmt.data.sentences import join_sentences, split_paragraph

CHINESE = [
    ("我很好。你好！他走了。", ["我很好。", "你好！", "他走了。"]),
    ("他说：“好。”然后走了。", ["他说：“好。”", "然后走了。"]),  # the ” stays with its sentence
    ("「你去吗？」他问。", ["「你去吗？」", "他问。"]),
    ("先做这个；再做那个。", ["先做这个；", "再做那个。"]),
    ("他想了想……然后说不。", ["他想了想……", "然后说不。"]),
    ("你来吗？？我来！", ["你来吗？？", "我来！"]),  # a run of marks is one end
    ('他说："好。"然后走了。', ['他说："好。"', "然后走了。"]),  # an ASCII quote it opened
    ('他走了。"你好。"', ["他走了。", '"你好。"']),  # an ASCII quote the next one opens
    ("圆周率是3.14。我记得。", ["圆周率是3.14。", "我记得。"]),
    ("没有句号", ["没有句号"]),
    ("你好。。。", ["你好。。。"]),
    ("……好吧。", ["……好吧。"]),  # marks before the first sentence stay with it
    ("好。——", ["好。——"]),  # and after the last, with it
]

ENGLISH = [
    ("I'm fine. How are you? Great!", ["I'm fine.", "How are you?", "Great!"]),
    ("Mr. Smith met Dr. Brown. They talked.", ["Mr. Smith met Dr. Brown.", "They talked."]),
    ("It costs 3.14 dollars. Pay now.", ["It costs 3.14 dollars.", "Pay now."]),
    ("Bring fruit, e.g. apples. Thanks.", ["Bring fruit, e.g. apples.", "Thanks."]),
    ("He lives in the U.S. now. Really.", ["He lives in the U.S. now.", "Really."]),
    ("Pens, paper, etc. All of it.", ["Pens, paper, etc. All of it."]),
    ('He said "Hi." Then he left.', ['He said "Hi."', "Then he left."]),
    ("Wait... what? No way.", ["Wait... what?", "No way."]),
    ("J. K. Rowling wrote it. (She did.) Yes.", ["J. K. Rowling wrote it.", "(She did.)", "Yes."]),
    ("He left. 3 people stayed.", ["He left.", "3 people stayed."]),
    ("no end here", ["no end here"]),
]


@pytest.mark.parametrize(("text", "sentences"), CHINESE)
def test_chinese_sentences_end_after_their_marks_and_closing_quotes(text, sentences):
    assert split_paragraph(normalize(text, "zh"), "zh") == [normalize(s, "zh") for s in sentences]


@pytest.mark.parametrize(("text", "sentences"), ENGLISH)
def test_english_sentences_leave_abbreviations_and_decimals_alone(text, sentences):
    assert split_paragraph(text, "en") == sentences


@pytest.mark.parametrize("text", ["", "   ", "。！？", "……", "?!", "—— ……", "...", '"."'])
def test_a_paragraph_of_punctuation_alone_has_no_sentence(text):
    assert split_paragraph(text, "zh") == [] and split_paragraph(text, "en") == []


def test_translations_join_with_a_space_in_english_and_none_in_chinese():
    assert join_sentences(["I'm fine.", "", "You?"], "en") == "I'm fine. You?"
    assert join_sentences(["我很好。", "", "你呢？"], "zh") == "我很好。你呢？"
    assert join_sentences([], "en") == ""
