"""The corpus pipeline: raw corpus -> clean pairs -> leak-free splits -> SentencePiece -> ids.

The processed folder (one per dataset and direction, `{processed_dir}/{name}.{src}-{tgt}`) holds
`{split}.{lang}` text files, the SentencePiece models, the ids (see `dataset.py`) and
`manifest.json`. It is built in a temporary sibling folder and renamed into place, so a folder
with a manifest is always complete; a rerun whose config and input hash to the manifest's
fingerprint does nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentencepiece import SentencePieceProcessor

from attnmt.config import to_dict
from attnmt.data import corpus
from attnmt.data.dataset import write_ids
from attnmt.data.split import SPLITS, Splits, split_pairs
from attnmt.data.tokenizer import load_sentencepiece, train_sentencepiece
from attnmt.errors import ConfigError, DataError

# Bump when the pipeline's output changes for the same config and input.
PIPELINE_VERSION = 1

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VocabConfig:
    """SentencePiece settings: separate models per language unless `joint`."""

    joint: bool = False
    src_size: int = 4000
    tgt_size: int = 4000
    joint_size: int = 8000
    model_type: str = "unigram"
    coverage: dict[str, float] = field(default_factory=lambda: {"zh": 0.9995, "en": 1.0})


@dataclass(frozen=True)
class DataConfig:
    """The `data` config group; see configs/data/*.yaml for what each key means."""

    name: str
    source: str = "tatoeba"
    raw_path: str | None = None
    url: str | None = None
    sha256: str | None = None
    en_path: str | None = None
    zh_path: str | None = None
    split_dir: str | None = None
    src_lang: str = "zh"
    tgt_lang: str = "en"
    processed_dir: str = "data/processed"
    dev_size: int = 1000
    test_size: int = 1000
    seed: int = 1234
    max_length: int = 80
    max_ratio: float = 5.0
    vocab: VocabConfig = field(default_factory=VocabConfig)

    def __post_init__(self) -> None:
        for key in ("src_lang", "tgt_lang"):
            if getattr(self, key) not in corpus.LANGUAGES:
                raise ConfigError(f"data.{key}={getattr(self, key)!r}: must be 'zh' or 'en'")
        if self.src_lang == self.tgt_lang:
            raise ConfigError(f"data.src_lang and data.tgt_lang are both {self.src_lang!r}")
        if self.source not in ("tatoeba", "files", "splits"):
            raise ConfigError(
                f"data.source={self.source!r}: must be 'tatoeba', 'files' or 'splits'"
            )
        if self.vocab.model_type not in ("unigram", "bpe"):
            raise ConfigError(
                f"data.vocab.model_type={self.vocab.model_type!r}: must be 'unigram' or 'bpe'"
            )

    @property
    def folder(self) -> Path:
        """Where the processed dataset of this config lives."""
        return Path(self.processed_dir) / f"{self.name}.{self.src_lang}-{self.tgt_lang}"


def spm_model_name(cfg: DataConfig, lang: str) -> str:
    """The file name of the SentencePiece model that tokenises `lang`."""
    return "spm.joint.model" if cfg.vocab.joint else f"spm.{lang}.model"


# ---------------------------------------------------------------- inputs


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
                raise DataError(f"{path}: file not found (set by data.{key})")
            paths.append(path)
        return paths
    if not cfg.raw_path:
        raise ConfigError("data.raw_path is required when data.source=tatoeba")
    raw_path = Path(cfg.raw_path)
    if not raw_path.is_file():
        _download(cfg, raw_path)
    return [raw_path]


def read_splits(cfg: DataConfig, paths: list[Path], report: corpus.CleaningReport) -> Splits:
    """Clean pairs from the config's source, split by `split_pairs` unless given split."""
    if cfg.source == "splits":  # paths: train.en, train.zh, dev.en, dev.zh, test.en, test.zh
        given = [corpus.clean(corpus.read_aligned(*paths[i : i + 2]), report) for i in (0, 2, 4)]
        if not given[0]:
            raise DataError(f"{paths[0]}: no training pairs left after cleaning")
        return Splits(*given)
    if cfg.source == "files":
        raw = corpus.read_aligned(paths[0], paths[1])
    else:
        raw = corpus.read_tatoeba(paths[0])
    pairs = corpus.clean(raw, report)
    if not pairs:
        raise DataError(
            f"{', '.join(map(str, paths))}: no pairs left after cleaning "
            f"({report.read} read, dropped {report.dropped})"
        )
    return split_pairs(pairs, cfg.dev_size, cfg.test_size, cfg.seed)


def fingerprint(cfg: DataConfig, hashes: list[str]) -> str:
    """A hash of everything the output depends on: the config (less where it goes) and input."""
    settings = to_dict(cfg)
    settings.pop("processed_dir")
    payload = json.dumps([PIPELINE_VERSION, settings, hashes], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


# ---------------------------------------------------------------- building


def _train_tokenizers(
    cfg: DataConfig, splits: Splits, folder: Path
) -> dict[str, SentencePieceProcessor]:
    """Train the SentencePiece model(s) on the train split only; return them by language."""
    langs = (cfg.src_lang, cfg.tgt_lang)
    sizes = {
        cfg.src_lang: ("data.vocab.src_size", cfg.vocab.src_size),
        cfg.tgt_lang: ("data.vocab.tgt_size", cfg.vocab.tgt_size),
    }
    if cfg.vocab.joint:
        sentences = [side for p in splits.train for side in (p.en, p.zh)]
        coverage = min(cfg.vocab.coverage.values())
        train_sentencepiece(
            sentences,
            folder / "spm.joint.model",
            cfg.vocab.joint_size,
            cfg.vocab.model_type,
            coverage,
            "data.vocab.joint_size",
        )
    else:
        for lang in langs:
            key, size = sizes[lang]
            train_sentencepiece(
                [p.side(lang) for p in splits.train],
                folder / f"spm.{lang}.model",
                size,
                cfg.vocab.model_type,
                cfg.vocab.coverage[lang],
                key,
            )
    return {lang: load_sentencepiece(folder / spm_model_name(cfg, lang)) for lang in langs}


def _encode_and_write(
    cfg: DataConfig,
    splits: Splits,
    models: dict[str, SentencePieceProcessor],
    folder: Path,
    report: corpus.CleaningReport,
) -> dict[str, int]:
    """Tokenise each split, apply the length rules to train, write text and ids; return counts."""
    counts = {}
    for split, pairs in splits.items():
        ids = {lang: model.encode([p.side(lang) for p in pairs]) for lang, model in models.items()}
        keep = list(range(len(pairs)))
        if split == "train":
            # dev and test stay whole so their scores are honest; only train is filtered.
            keep = []
            for i in range(len(pairs)):
                rule = corpus.length_rule(
                    len(ids[cfg.src_lang][i]),
                    len(ids[cfg.tgt_lang][i]),
                    cfg.max_length,
                    cfg.max_ratio,
                )
                if rule:
                    report.drop(rule)
                else:
                    keep.append(i)
            if not keep:
                raise DataError(
                    "no training pairs left after the length rules "
                    f"(data.max_length={cfg.max_length}, "
                    f"data.max_ratio={cfg.max_ratio})"
                )
        for lang in models:
            text = "".join(pairs[i].side(lang) + "\n" for i in keep)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
            write_ids(folder, split, lang, [ids[lang][i] for i in keep])
        counts[split] = len(keep)
    return counts


def _build(cfg: DataConfig, paths: list[Path], hashes: list[str], folder: Path) -> dict[str, Any]:
    """Write the whole processed dataset into `folder` (a fresh temporary folder)."""
    report = corpus.CleaningReport()
    splits = read_splits(cfg, paths, report)
    models = _train_tokenizers(cfg, splits, folder)
    counts = _encode_and_write(cfg, splits, models, folder, report)
    vocab = {
        lang: {"model": spm_model_name(cfg, lang), "size": model.get_piece_size()}
        for lang, model in models.items()
    }
    return {
        "pipeline_version": PIPELINE_VERSION,
        "fingerprint": fingerprint(cfg, hashes),
        "sources": [
            {"path": str(p.resolve()), "sha256": h} for p, h in zip(paths, hashes, strict=True)
        ],
        "src_lang": cfg.src_lang,
        "tgt_lang": cfg.tgt_lang,
        "read": report.read,
        "dropped": {
            rule: report.dropped.get(rule, 0)
            for rule in ("empty_side", "duplicate", "too_long", "length_ratio")
        },
        "counts": counts,
        "vocab": vocab,
        "seed": cfg.seed,
        "config": to_dict(cfg),
    }


def _check_hash(cfg: DataConfig, paths: list[Path], hashes: list[str]) -> None:
    if cfg.sha256 and cfg.source == "tatoeba" and hashes[0] != cfg.sha256:
        raise DataError(
            f"{paths[0]}: sha256 is {hashes[0]}, data.sha256 expects {cfg.sha256}; "
            "pass data.sha256=null to use a different version of the corpus"
        )


def prepare_dataset(cfg: DataConfig) -> tuple[Path, dict[str, Any], bool]:
    """Build the processed folder of `cfg` unless it is up to date.

    Returns the folder, its manifest, and whether it was (re)built.
    """
    paths = input_files(cfg)
    hashes = [corpus.sha256_of(p) for p in paths]
    _check_hash(cfg, paths, hashes)
    folder = cfg.folder
    manifest_path = folder / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("fingerprint") == fingerprint(cfg, hashes):
            return folder, manifest, False
        log.info("%s is out of date: rebuilding", folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    for stale in folder.parent.glob(f".{folder.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)  # left by an interrupted run
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        manifest = _build(cfg, paths, hashes, tmp)
        (tmp / "manifest.json").write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if folder.exists():
            old = folder.parent / f".{folder.name}.tmp-old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old)
        else:
            os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder, manifest, True


def summary_table(manifest: dict[str, Any]) -> str:
    """A plain-text table of what `prepare_dataset` kept and dropped."""
    rows = [("pairs read", manifest["read"])]
    rows += [(f"dropped: {rule}", n) for rule, n in manifest["dropped"].items()]
    rows += [(f"{split} pairs", manifest["counts"][split]) for split in SPLITS]
    rows += [
        (f"vocabulary {lang} ({v['model']})", v["size"]) for lang, v in manifest["vocab"].items()
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value:>8,}" for name, value in rows]
    rule = "-" * len(lines[0])
    title = f"dataset {manifest['src_lang']}->{manifest['tgt_lang']}"
    return "\n".join([title, rule, *lines, rule])
