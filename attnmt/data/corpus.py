"""Reading a raw parallel corpus and cleaning it into (English, Chinese) pairs.

Normalisation (one documented choice, applied to every source):
- both sides: Unicode NFKC, which folds full-width Latin letters and digits ("Ａ１" -> "A1") and
  other compatibility forms, then runs of whitespace collapse to one space and the ends are
  stripped;
- Chinese side: NFKC turns full-width punctuation such as "，！？" into ASCII, but leaves "。"
  alone, so the Chinese side would mix both styles. We map the ASCII marks , ! ? ; : ( ) back to
  their full-width forms (，！？；：（）) on the Chinese side, except between two digits
  ("3:00", "1,000"), so Chinese text always uses full-width punctuation, as it is written, and
  drop a space beside a full-width mark (Chinese puts none there). "." is left alone: it is as
  often a decimal point or part of a Latin word as a full stop.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import re
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.errors import DataError

LANGUAGES = ("en", "zh")

_FULL_WIDTH = {",": "，", "!": "！", "?": "？", ";": "；", ":": "：", "(": "（", ")": "）"}
# An ASCII mark that is not between two digits.
_ZH_PUNCT = re.compile(r"(?<!\d)[,:]|[,:](?!\d)|[!?;()]")
_SPACES = re.compile(r"\s+")
_SPACE_BY_ZH_PUNCT = re.compile(r" ?([，。！？；：（）、]) ?")


@dataclass(frozen=True)
class Pair:
    """One sentence pair, keyed by language."""

    en: str
    zh: str

    def side(self, lang: str) -> str:
        return self.en if lang == "en" else self.zh


@dataclass
class CleaningReport:
    """How many pairs were read and how many each rule dropped."""

    read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, rule: str, count: int = 1) -> None:
        self.dropped[rule] = self.dropped.get(rule, 0) + count


def normalize(text: str, lang: str) -> str:
    """The normalisation documented at the top of this module."""
    text = _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip()
    if lang == "zh":
        text = _ZH_PUNCT.sub(lambda m: _FULL_WIDTH[m.group(0)], text)
        text = _SPACE_BY_ZH_PUNCT.sub(r"\1", text)
    return text


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def open_binary(path: Path) -> io.BufferedIOBase:
    """Open a plain, gzip, bz2 or zip file for reading bytes, recognised by its first bytes.

    A zip archive must hold exactly one .txt member (as the Tatoeba download does).
    """
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    if magic == b"PK\x03\x04":
        archive = zipfile.ZipFile(path)
        members = [n for n in archive.namelist() if n.endswith(".txt") and "/" not in n]
        if len(members) != 1:
            raise DataError(f"{path}: a zip corpus must hold one .txt file, found {members}")
        return archive.open(members[0])
    return open(path, "rb")


def decode_lines(handle: Iterable[bytes], name: str) -> Iterator[str]:
    """Decode byte lines as UTF-8 without their line ends; `name` (a file) names errors."""
    for number, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(
                f"{name}:{number}: invalid UTF-8 at byte {error.start} of the line"
            ) from None
        yield line.rstrip("\r\n")


def read_lines(path: Path) -> Iterator[str]:
    """Yield the lines of a (possibly compressed) UTF-8 text file without their line ends."""
    with open_binary(path) as handle:
        yield from decode_lines(handle, str(path))


def read_tatoeba(path: Path) -> Iterator[tuple[str, str]]:
    """Yield (English, Chinese) from a Tatoeba export: English TAB Chinese TAB attribution."""
    for number, line in enumerate(read_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) < 2:
            raise DataError(
                f"{path}:{number}: expected 'English<TAB>Chinese<TAB>attribution', "
                f"found {len(columns)} column"
            )
        yield columns[0], columns[1]


def read_aligned(en_path: Path, zh_path: Path) -> Iterator[tuple[str, str]]:
    """Yield (English, Chinese) from two line-aligned files; unequal line counts are an error."""
    en_lines, zh_lines = list(read_lines(en_path)), list(read_lines(zh_path))
    if len(en_lines) != len(zh_lines):
        raise DataError(
            f"line counts differ: {en_path} has {len(en_lines)} lines, "
            f"{zh_path} has {len(zh_lines)}"
        )
    yield from zip(en_lines, zh_lines, strict=True)


def clean(raw_pairs: Iterator[tuple[str, str]], report: CleaningReport) -> list[Pair]:
    """Normalise every pair, drop pairs with an empty side, and drop exact duplicates.

    The length rules need the SentencePiece models, so they run later (see `filter_lengths`).
    """
    seen: set[Pair] = set()
    pairs: list[Pair] = []
    for en, zh in raw_pairs:
        report.read += 1
        pair = Pair(normalize(en, "en"), normalize(zh, "zh"))
        if not pair.en or not pair.zh:
            report.drop("empty_side")
        elif pair in seen:
            report.drop("duplicate")
        else:
            seen.add(pair)
            pairs.append(pair)
    return pairs


def length_rule(src_len: int, tgt_len: int, max_length: int, max_ratio: float) -> str | None:
    """The name of the length rule a pair of piece counts breaks, or None when it passes."""
    if max(src_len, tgt_len) > max_length:
        return "too_long"
    if max(src_len, tgt_len) > max_ratio * max(1, min(src_len, tgt_len)):
        return "length_ratio"
    return None
