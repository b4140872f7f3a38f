"""Where a dataset's raw pairs come from: the default corpus (downloaded when it is absent), two
line-aligned files, or a corpus already split (see configs/data/)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from attnmt.data import corpus
from attnmt.data.config import DataConfig
from attnmt.data.split import SPLITS
from attnmt.errors import ConfigError, DataError

log = logging.getLogger(__name__)


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


def input_files(cfg: DataConfig) -> list[Path]:
    """The raw input files of this config, downloading the default corpus when it is absent."""
    if cfg.source == "splits":
        if not cfg.split_dir:
            raise ConfigError("data.split_dir is required when data.source=splits")
        paths = [
            Path(cfg.split_dir) / f"{split}.{lang}" for split in SPLITS for lang in ("en", "zh")
        ]
        for path in paths:
            if not path.is_file():
                raise DataError(
                    f"{path}: file not found (data.split_dir holds {{train,dev,test}}.{{en,zh}})"
                )
        return paths
    if cfg.source == "files":
        paths = []
        for key in ("en_path", "zh_path"):
            value = getattr(cfg, key)
            if not value:
                raise ConfigError(f"data.{key} is required when data.source=files")
            path = Path(value)
            if not path.is_file():
                problem = "is a folder, not a file" if path.is_dir() else "file not found"
                raise DataError(f"{path}: {problem} (set by data.{key})")
            paths.append(path)
        return paths
    if not cfg.raw_path:
        raise ConfigError("data.raw_path is required when data.source=tatoeba")
    raw_path = Path(cfg.raw_path)
    if raw_path.is_dir():
        raise DataError(f"{raw_path}: is a folder; data.raw_path names the corpus file")
    if not raw_path.is_file():
        _download(cfg, raw_path)
    return [raw_path]


def raw_parts(cfg: DataConfig, paths: list[Path]) -> list[Iterator[tuple[str, str]]]:
    """The raw (English, Chinese) pairs of each input: the three given splits, or one corpus."""
    if cfg.source == "splits":  # paths: train.en, train.zh, dev.en, dev.zh, test.en, test.zh
        return [corpus.read_aligned(*paths[i : i + 2]) for i in (0, 2, 4)]
    if cfg.source == "files":
        return [corpus.read_aligned(paths[0], paths[1])]
    return [corpus.read_tatoeba(paths[0])]


def check_sha256(cfg: DataConfig, paths: list[Path], hashes: list[str]) -> None:
    """Refuse a default corpus whose sha256 is not the one `data.sha256` names."""
    if cfg.sha256 and cfg.source == "tatoeba" and hashes[0] != cfg.sha256:
        raise DataError(
            f"{paths[0]}: sha256 is {hashes[0]}, data.sha256 expects {cfg.sha256}; "
            "pass data.sha256=null to use a different version of the corpus"
        )
