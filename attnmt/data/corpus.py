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
import itertools
import re
import unicodedata
import zipfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from attnmt.errors import DataError

LANGUAGES = ("en", "zh")
T = TypeVar("T")

_FULL_WIDTH = {",": "，", "!": "！", "?": "？", ";": "；", ":": "：", "(": "（", ")": "）"}
# An ASCII mark that is not between two digits.
_ZH_PUNCT = re.compile(r"(?<!\d)[,:]|[,:](?!\d)|[!?;()]")
_SPACES = re.compile(r"\s+")
_SPACE_BY_ZH_PUNCT = re.compile(r" ?([，。！？；：（）、]) ?")


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

    A zip archive must hold exactly one .txt member (as the Tatoeba download does). A pipe or
    device (/dev/stdin, a shell's <(...)) is read once, as plain text.
    """
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a folder, not a text file")
    if not path.is_file():
        return open(path, "rb")
    with open(path, "rb") as handle:
        magic = handle.read(10)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    # "BZh", the block size, then the magic of a block or of the end of the stream: a text
    # line may begin with "BZh" too.
    if magic[:3] == b"BZh" and magic[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return bz2.open(path, "rb")
    if magic[:4] == b"PK\x03\x04":
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


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of `size` items (the last one shorter): a stream, a block at a time."""
    items = iter(items)
    while chunk := list(itertools.islice(items, size)):
        yield chunk


def read_own_lines(path: Path) -> Iterator[str]:
    """The lines of a plain UTF-8 file attnmt wrote itself (not sniffed for compression: a
    staged sentence may well begin with "BZh")."""
    with open(path, "rb") as handle:
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
    """Yield (English, Chinese) from two line-aligned files, streamed; unequal line counts are
    an error that names both counts."""
    end = object()
    en_lines, zh_lines = read_lines(en_path), read_lines(zh_path)
    for count, (en, zh) in enumerate(itertools.zip_longest(en_lines, zh_lines, fillvalue=end)):
        if en is end or zh is end:
            longer = count + 1 + sum(1 for _ in (zh_lines if en is end else en_lines))
            en_count, zh_count = (count, longer) if en is end else (longer, count)
            raise DataError(
                f"line counts differ: {en_path} has {en_count} lines, {zh_path} has {zh_count}"
            )
        yield en, zh


_CEDICT_ENTRY = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/$")
_CJK = re.compile(r"[\u3400-\u9fff]")
_PARENTHESES = re.compile(r"\([^)]*\)")
# Glosses that are notes about the headword, not its translation (checked once the
# parenthesised remarks are out).
_CEDICT_NOTES = ("surname ", "see ", "CL:", "abbr. for", "used in ", "also pr.", "Taiwan pr.")


def read_cedict(path: Path) -> Iterator[tuple[str, str]]:
    """Yield (English, Chinese) from a CC-CEDICT file (`Traditional Simplified [pinyin]
    /gloss/gloss/`): each entry's simplified headword with each gloss that translates it, its
    parenthesised remarks and "lit."/"fig." marks taken out (not a note such as "surname X",
    "... variant of", "CL:", "also pr.", nor one that cites Chinese). Comment lines (#) are
    skipped; a line that is not an entry is an error naming it."""
    for number, line in enumerate(read_lines(path), start=1):
        if not line or line.startswith("#"):
            continue
        match = _CEDICT_ENTRY.match(line)
        if not match:
            raise DataError(f"{path}:{number}: not a CC-CEDICT entry ('T S [pinyin] /gloss/')")
        simplified = match[2]
        for gloss in match[3].split("/"):
            gloss = _PARENTHESES.sub("", gloss).strip()
            if gloss.startswith(_CEDICT_NOTES) or "variant of" in gloss or _CJK.search(gloss):
                continue
            for mark in ("lit. ", "fig. "):
                gloss = gloss.removeprefix(mark)
            gloss = _SPACES.sub(" ", gloss).strip(" ;,")
            if gloss:
                yield gloss, simplified


def sentence_key(text: str) -> int:
    """A 64-bit hash of a sentence: what deduplication and the leak-free split compare, so
    they hold 8 bytes per sentence, not the sentence (the odds that two of 10 million distinct
    sentences share a key are about 1 in 400,000)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


@dataclass
class StagedPairs:
    """Normalised pairs with both sides non-empty, one per line in two files, in input order;
    with the key (`sentence_key`) of each side and the input (`part`) each came from."""

    en_path: Path
    zh_path: Path
    en_keys: np.ndarray  # (N,) uint64
    zh_keys: np.ndarray  # (N,) uint64
    parts: np.ndarray  # (N,) int8

    def __len__(self) -> int:
        return len(self.en_keys)

    def first_occurrences(self) -> np.ndarray:
        """(N,) bool: the first pair of each set of exact duplicates (same input, same sides)."""
        rows = np.stack([self.parts.astype(np.uint64), self.en_keys, self.zh_keys], axis=1)
        _, first = np.unique(rows, axis=0, return_index=True)
        keep = np.zeros(len(self), dtype=bool)
        keep[first] = True
        return keep

    def lines(self) -> Iterator[tuple[str, str]]:
        """The staged (English, Chinese) pairs, read back in order."""
        return zip(read_own_lines(self.en_path), read_own_lines(self.zh_path), strict=True)


def stage_pairs(
    parts: Sequence[Iterable[tuple[str, str]]], folder: Path, report: CleaningReport
) -> StagedPairs:
    """Normalise the pairs of each input in `parts`, drop (and count) those with an empty side,
    and write the rest to folder/.clean.en and .clean.zh; memory keeps only their keys."""
    en_keys, zh_keys, part_ids = array("Q"), array("Q"), array("b")
    paths = folder / ".clean.en", folder / ".clean.zh"
    with (
        open(paths[0], "w", encoding="utf-8") as en_out,
        open(paths[1], "w", encoding="utf-8") as zh_out,
    ):
        for part, raw_pairs in enumerate(parts):
            for raw_en, raw_zh in raw_pairs:
                report.read += 1
                en, zh = normalize(raw_en, "en"), normalize(raw_zh, "zh")
                if not en or not zh:
                    report.drop("empty_side")
                    continue
                en_out.write(en + "\n")
                zh_out.write(zh + "\n")
                en_keys.append(sentence_key(en))
                zh_keys.append(sentence_key(zh))
                part_ids.append(part)
    return StagedPairs(
        *paths,
        np.frombuffer(en_keys, dtype=np.uint64),
        np.frombuffer(zh_keys, dtype=np.uint64),
        np.frombuffer(part_ids, dtype=np.int8),
    )


def length_rule(src_len: int, tgt_len: int, max_length: int, max_ratio: float) -> str | None:
    """The name of the length rule a pair of piece counts breaks, or None when it passes."""
    if max(src_len, tgt_len) > max_length:
        return "too_long"
    if max(src_len, tgt_len) > max_ratio * max(1, min(src_len, tgt_len)):
        return "length_ratio"
    return None
