"""A paragraph into sentences, and their translations joined back into one.

The model learned from sentences and translates a long input poorly, so a paragraph is split,
its sentences translated together, and their translations joined (a space between English
sentences, none between Chinese). Rules, on text normalised as in training
(`attnmt.data.corpus.normalize`):

- Chinese: a sentence ends after 。！？； (or ASCII !?;) or an ellipsis (… or a run of dots:
  NFKC makes "……" six of them); the closing quotes and brackets after it stay with it, so
  他说：“好。”然后走了。 is 他说：“好。” and 然后走了。 An ASCII quote closes only where one is
  open in the sentence.
- English: a sentence ends after . ! ? and any closing quotes and brackets, where a space and a
  word that does not start in lower case follow. A "." ends none after an abbreviation
  (ABBREVIATIONS: Mr. Dr. etc.), an initial or a dotted word (J. U.S. e.g.); a decimal (3.14)
  has no space after its dot.
- A stretch with no letter or digit (a stray mark) stays with the sentence before it (or the
  one after, at the start); a paragraph of punctuation alone has no sentence.

No sentence-splitting library: nltk's punkt, spaCy and stanza bring models and dependencies,
pysbd (pure Python, with Chinese rules) has had no release since 2021, and these rules fit in a
page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A "." after one of these (case as written) ends no sentence.
ABBREVIATIONS = frozenset(
    {"Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "vs", "etc", "No", "Inc", "Ltd"}
    | {"Co", "Corp", "Fig", "approx"}
)
_CLOSERS = "”’」』）》〉】〕)]"
_ZH_END = re.compile(rf"(?:[。！？；!?;]+|…+|\.{{2,}})[{re.escape(_CLOSERS)}]*")
_EN_END = re.compile(rf"[.!?]+[{re.escape(_CLOSERS)}\"']*(?=\s|$)")
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+")  # an initial (J.), U.S., e.g., a.m.
_WORD = re.compile(r"[^\W_]")  # a letter or digit, in any script


def split_paragraph(text: str, lang: str) -> list[str]:
    """The sentences of `text` in language `lang` (zh or en), stripped, in order (see the
    module for the rules); none for a text of punctuation and spaces alone."""
    ends = _chinese_ends(text) if lang == "zh" else _english_ends(text)
    sentences: list[list[int]] = []  # [start, end] of each
    start = 0
    for end in [*ends, len(text)]:
        if end <= start:
            continue
        if _WORD.search(text, start, end) is None:  # a stray mark: stays with a sentence
            if sentences:
                sentences[-1][1] = end
        else:
            sentences.append([start if sentences else 0, end])  # (with any marks before)
        start = end
    return [text[start:end].strip() for start, end in sentences]


def join_sentences(translations: Sequence[str], lang: str) -> str:
    """Translations of consecutive sentences into language `lang` as one paragraph: a space
    between English sentences, none between Chinese; empty ones left out."""
    return ("" if lang == "zh" else " ").join(t for t in translations if t)


def _chinese_ends(text: str) -> list[int]:
    """Where each Chinese sentence of `text` ends (the offset after it)."""
    ends, start = [], 0
    for match in _ZH_END.finditer(text):
        end = match.end()
        while end < len(text) and text[end] in "\"'" and text[start:end].count(text[end]) % 2:
            end += 1  # an ASCII quote the sentence opened
        ends.append(end)
        start = end
    return ends


def _english_ends(text: str) -> list[int]:
    """Where each English sentence of `text` ends (the offset after it)."""
    ends = []
    for match in _EN_END.finditer(text):
        after = text[match.end() :].lstrip()
        if after[:1].islower():
            continue
        if match.group().rstrip(_CLOSERS + "\"'") == ".":
            words = text[: match.start()].split()
            word = words[-1].lstrip("(\"'“‘") if words else ""
            if word in ABBREVIATIONS or _DOTTED.fullmatch(word + "."):
                continue
        ends.append(match.end())
    return ends
