"""The corpus pipeline: raw corpus -> clean pairs -> leak-free splits -> SentencePiece -> ids.

The processed folder (one per data config, `{processed_dir}/{name}.{src}-{tgt}.{hash}`) holds
`{split}.{lang}` text files, the SentencePiece models, the ids (see `ids.py`) and
`manifest.json`. It is built in a temporary sibling folder and renamed into place, so a folder
with a manifest is always complete; a rerun whose config and input hash to the manifest's
fingerprint does nothing. Concurrent runs of one config build it once (`folder.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from sentencepiece import SentencePieceProcessor

from attnmt.config import output_path, to_dict
from attnmt.data import corpus, sources
from attnmt.data.config import (
    PIPELINE_VERSION,
    Corpus,
    DataConfig,
    given_digests,
    spm_model_name,
)
from attnmt.data.folder import building, current_manifest, move_into_place
from attnmt.data.ids import IdsWriter
from attnmt.data.mix import CORPUS_FILE, CorpusMix
from attnmt.data.split import SPLITS, TRAIN, assign_splits, group_pairs
from attnmt.data.tokenizer import load_sentencepiece, train_sentencepiece
from attnmt.errors import ConfigError, DataError
from attnmt.vocab import UNK_ID

ENCODE_CHUNK = 10_000  # pairs tokenised at a time

log = logging.getLogger(__name__)


def _split_codes(
    cfg: DataConfig,
    staged: corpus.StagedPairs,
    paths: list[Path],
    report: corpus.CleaningReport,
    evaluated: np.ndarray | None = None,
    first_part: int = 0,
) -> np.ndarray:
    """The split code (TRAIN, DEV, TEST) of each staged pair, -1 for a dropped duplicate.

    With several corpora, `evaluated` marks the pairs of the one that gives dev and test (its
    inputs start at part `first_part`); the pairs of the others all go to train, except those
    sharing a sentence with a dev or test pair, which are dropped (`dev_test_overlap`)."""
    keep = staged.first_occurrences()
    if duplicates := int(len(keep) - keep.sum()):
        report.drop("duplicate", duplicates)
    if evaluated is not None:
        return _mixed_split_codes(cfg, staged, paths, report, keep, evaluated, first_part)
    codes = np.full(len(staged), -1, dtype=np.int8)
    if sources.source_of(cfg).given_splits:  # the inputs are the splits, in SPLITS order
        codes[keep] = staged.parts[keep]
        if not (codes == TRAIN).any():
            raise DataError(f"{paths[0]}: no training pairs left after cleaning")
        return codes
    if not keep.any():
        raise DataError(
            f"{', '.join(map(str, paths))}: no pairs left after cleaning "
            f"({report.read} read, dropped {report.dropped})"
        )
    kept = np.flatnonzero(keep)
    groups = group_pairs(staged.en_keys[kept], staged.zh_keys[kept])
    codes[kept] = assign_splits(groups, cfg.dev_size, cfg.test_size, cfg.seed)
    return codes


def _mixed_split_codes(
    cfg: DataConfig,
    staged: corpus.StagedPairs,
    paths: list[Path],
    report: corpus.CleaningReport,
    keep: np.ndarray,
    evaluated: np.ndarray,
    first_part: int,
) -> np.ndarray:
    """`_split_codes` with several corpora (see there)."""
    codes = np.full(len(staged), -1, dtype=np.int8)
    own = np.flatnonzero(keep & evaluated)
    if not len(own):
        raise DataError(f"{', '.join(map(str, paths))}: the evaluated corpus has no clean pairs")
    if sources.source_of(cfg).given_splits:
        codes[own] = staged.parts[own] - first_part
    else:
        groups = group_pairs(staged.en_keys[own], staged.zh_keys[own])
        codes[own] = assign_splits(groups, cfg.dev_size, cfg.test_size, cfg.seed)
    held = codes > TRAIN  # dev and test
    others = np.flatnonzero(keep & ~evaluated)
    overlap = np.isin(staged.en_keys[others], staged.en_keys[held]) | np.isin(
        staged.zh_keys[others], staged.zh_keys[held]
    )
    codes[others[~overlap]] = TRAIN
    report.drop("dev_test_overlap", int(overlap.sum()))
    return codes


def _write_split_text(staged: corpus.StagedPairs, codes: np.ndarray, folder: Path) -> None:
    """Route each kept staged pair to folder/.{split}.{lang}, keeping the input order."""
    with contextlib.ExitStack() as stack:
        outs = [
            {
                lang: stack.enter_context(open(folder / f".{split}.{lang}", "w", encoding="utf-8"))
                for lang in corpus.LANGUAGES
            }
            for split in SPLITS
        ]
        for code, (en, zh) in zip(codes.tolist(), staged.lines(), strict=True):
            if code >= 0:
                outs[code]["en"].write(en + "\n")
                outs[code]["zh"].write(zh + "\n")


def fingerprint(
    cfg: DataConfig, hashes: list[str], given: Mapping[str, bytes] | None = None
) -> str:
    """A hash of everything the output depends on: the config (less where it goes), the input
    and any given SentencePiece models."""
    payload = json.dumps([cfg.settings(given), hashes], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


# ---------------------------------------------------------------- building


def _train_tokenizers(
    cfg: DataConfig, folder: Path, train_pairs: int, use: np.ndarray | None = None
) -> dict[str, SentencePieceProcessor]:
    """Train the SentencePiece model(s) on the train split only (with several corpora, on the
    pairs `use` marks); return them by language."""

    def train_lines(lang: str) -> Iterator[str]:
        lines = corpus.read_own_lines(folder / f".train.{lang}")
        return lines if use is None else itertools.compress(lines, use)

    if use is not None:
        train_pairs = int(use.sum())

    langs = (cfg.src_lang, cfg.tgt_lang)
    sizes = {
        cfg.src_lang: ("data.vocab.src_size", cfg.vocab.src_size),
        cfg.tgt_lang: ("data.vocab.tgt_size", cfg.vocab.tgt_size),
    }
    if cfg.vocab.joint:
        both = zip(train_lines("en"), train_lines("zh"), strict=True)
        train_sentencepiece(
            (sentence for pair in both for sentence in pair),
            2 * train_pairs,
            folder / "spm.joint.model",
            cfg.vocab.joint_size,
            cfg.vocab.model_type,
            min(cfg.vocab.coverage.values()),
            cfg.vocab.max_sentences,
            "data.vocab.joint_size",
            cfg.vocab.byte_fallback,
        )
    else:
        for lang in langs:
            key, size = sizes[lang]
            train_sentencepiece(
                train_lines(lang),
                train_pairs,
                folder / f"spm.{lang}.model",
                size,
                cfg.vocab.model_type,
                cfg.vocab.coverage[lang],
                cfg.vocab.max_sentences,
                key,
                cfg.vocab.byte_fallback and lang == "zh",  # English's coverage is 1.0
            )
    return {lang: load_sentencepiece(folder / spm_model_name(cfg, lang)) for lang in langs}


def _given_tokenizers(
    cfg: DataConfig, folder: Path, given: Mapping[str, bytes]
) -> dict[str, SentencePieceProcessor]:
    """Write the given SentencePiece models (a checkpoint's, by language) where trained ones
    would go, and load them."""
    for lang in (cfg.src_lang, cfg.tgt_lang):
        (folder / spm_model_name(cfg, lang)).write_bytes(given[lang])
    return {
        lang: load_sentencepiece(folder / spm_model_name(cfg, lang))
        for lang in (cfg.src_lang, cfg.tgt_lang)
    }


def _encode_and_write(
    cfg: DataConfig,
    models: dict[str, SentencePieceProcessor],
    folder: Path,
    report: corpus.CleaningReport,
    train_corpus: np.ndarray | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Tokenise each split a chunk at a time, apply the length rules to train, write the text
    and the ids; return the pair count of each split and the `<unk>` pieces in its sources.
    With several corpora (`train_corpus`: the corpus of each staged training pair), the
    corpus of each kept one goes to `train.corpus.npy`."""
    kept_corpus: list[np.ndarray] = []
    langs = (cfg.src_lang, cfg.tgt_lang)
    counts, unknown = {}, {}
    for split in SPLITS:
        with contextlib.ExitStack() as stack:
            texts = [
                stack.enter_context(open(folder / f"{split}.{lang}", "w", encoding="utf-8"))
                for lang in langs
            ]
            ids = [
                stack.enter_context(IdsWriter(folder, split, lang, models[lang].get_piece_size()))
                for lang in langs
            ]
            staged = zip(
                *(corpus.read_own_lines(folder / f".{split}.{lang}") for lang in langs), strict=True
            )
            counts[split] = unknown[split] = 0
            seen = 0  # staged pairs of this split read so far
            for chunk in corpus.chunks(staged, ENCODE_CHUNK):
                sides = list(zip(*chunk, strict=True))  # (source sentences, target sentences)
                encoded = [
                    models[lang].encode(list(side)) for lang, side in zip(langs, sides, strict=True)
                ]
                keep = range(len(chunk))
                if split == "train":  # dev and test stay whole so their scores are honest
                    keep = [i for i in keep if _passes_length_rules(cfg, encoded, i, report)]
                    if train_corpus is not None:
                        kept_corpus.append(train_corpus[seen + np.asarray(keep, dtype=np.int64)])
                    seen += len(chunk)
                for side, side_ids, text, writer in zip(sides, encoded, texts, ids, strict=True):
                    text.write("".join(side[i] + "\n" for i in keep))
                    writer.add([side_ids[i] for i in keep])
                counts[split] += len(keep)
                unknown[split] += sum(encoded[0][i].count(UNK_ID) for i in keep)
        if split == "train" and not counts[split]:
            raise DataError(
                "no training pairs left after the length rules "
                f"(data.max_length={cfg.max_length}, data.max_ratio={cfg.max_ratio})"
            )
    if train_corpus is not None:
        np.save(folder / CORPUS_FILE, np.concatenate(kept_corpus).astype(np.int8))
    return counts, unknown


def _passes_length_rules(
    cfg: DataConfig, encoded: list[list[list[int]]], i: int, report: corpus.CleaningReport
) -> bool:
    """Whether pair i of a chunk passes the length rules; a pair that fails is counted."""
    rule = corpus.length_rule(len(encoded[0][i]), len(encoded[1][i]), cfg.max_length, cfg.max_ratio)
    if rule:
        report.drop(rule)
    return rule is None


def _input_paths(inputs: list[tuple[Corpus, list[Path]]]) -> list[Path]:
    """The input files of every corpus, in order (as their hashes are listed)."""
    return [path for _, files in inputs for path in files]


def _stage_and_split(
    cfg: DataConfig,
    inputs: list[tuple[Corpus, list[Path]]],
    folder: Path,
    report: corpus.CleaningReport,
) -> tuple[list[int], np.ndarray | None]:
    """Stage the clean pairs of every corpus, split them, and write each split's text to
    folder/.{split}.{lang}; return the pair count of each split and, with several corpora, the
    corpus of each training pair. The keys are freed on return, before SentencePiece."""
    paths = _input_paths(inputs)
    log.info("reading and normalising %s", ", ".join(map(str, paths)))
    parts, part_corpus = [], []
    for index, (entry, files) in enumerate(inputs):
        found = sources.source_of(entry.data).raw_parts(entry.data, files)
        parts += found
        part_corpus += [index] * len(found)
    staged = corpus.stage_pairs(parts, folder, report)
    if len(inputs) == 1:
        codes, train_corpus = _split_codes(inputs[0][0].data, staged, paths, report), None
    else:
        marked = next(i for i, (entry, _) in enumerate(inputs) if entry.evaluate)
        corpus_of = np.asarray(part_corpus, dtype=np.int8)[staged.parts]
        evaluated_cfg = inputs[marked][0].data
        codes = _split_codes(
            evaluated_cfg, staged, paths, report, corpus_of == marked, part_corpus.index(marked)
        )
        train_corpus = corpus_of[codes == TRAIN]
    _write_split_text(staged, codes, folder)
    staged.en_path.unlink()  # routed to the splits: a copy of the corpus less on disk
    staged.zh_path.unlink()
    return [int((codes == code).sum()) for code in range(len(SPLITS))], train_corpus


def _build(
    cfg: DataConfig,
    inputs: list[tuple[Corpus, list[Path]]],
    hashes: list[str],
    folder: Path,
    given: Mapping[str, bytes] | None,
) -> dict[str, Any]:
    """Write the whole processed dataset into `folder` (a fresh temporary folder).

    The corpus streams through in passes, so memory holds a few numbers per pair, never the
    pairs: normalise and key each pair (staging the text in dot-files), deduplicate and split by
    key, route the text to per-split files, train SentencePiece, then encode a chunk at a time.
    """
    report = corpus.CleaningReport()
    sizes, train_corpus = _stage_and_split(cfg, inputs, folder, report)
    log.info(
        "%s pairs read; split %s",
        f"{report.read:,}",
        ", ".join(f"{name} {size:,}" for name, size in zip(SPLITS, sizes, strict=True)),
    )
    if given:
        log.info("tokenising with the given SentencePiece models")
        models = _given_tokenizers(cfg, folder, given)
    else:
        log.info("training SentencePiece on the train split")
        use = None
        if train_corpus is not None:  # each corpus by its weight, as an epoch draws them
            weights = tuple(entry.weight for entry, _ in inputs)
            evaluated = next(i for i, (entry, _) in enumerate(inputs) if entry.evaluate)
            use = CorpusMix(train_corpus, weights, evaluated).tokenizer_lines(cfg.seed)
        models = _train_tokenizers(cfg, folder, sizes[TRAIN], use)
    log.info("tokenising")
    counts, unknown = _encode_and_write(cfg, models, folder, report, train_corpus)
    for staging in folder.glob(".*"):
        staging.unlink()
    vocab = {
        lang: {"model": spm_model_name(cfg, lang), "size": model.get_piece_size()}
        for lang, model in models.items()
    }
    manifest = {
        "pipeline_version": PIPELINE_VERSION,
        "fingerprint": fingerprint(cfg, hashes, given),
        "sources": [
            {"path": str(p.resolve()), "sha256": h}
            for p, h in zip(_input_paths(inputs), hashes, strict=True)
        ],
        "src_lang": cfg.src_lang,
        "tgt_lang": cfg.tgt_lang,
        "read": report.read,
        "dropped": {
            rule: report.dropped.get(rule, 0)
            for rule in ("empty_side", "duplicate", "too_long", "length_ratio")
            + (("dev_test_overlap",) if len(inputs) > 1 else ())
        },
        "counts": counts,
        # What the source vocabulary lacks: 0 with data.vocab.byte_fallback on the source side.
        "unknown_source_pieces": unknown,
        "vocab": vocab,
        "seed": cfg.seed,
        "config": {k: v for k, v in to_dict(cfg).items() if k != "corpora" or v is not None},
    }
    if len(inputs) > 1:  # what `CorpusMix` samples by
        kept = np.load(folder / CORPUS_FILE)
        manifest["corpora"] = [
            {
                "source": entry.data.source,
                "weight": entry.weight,
                "evaluate": entry.evaluate,
                "train_pairs": int((kept == index).sum()),
            }
            for index, (entry, _) in enumerate(inputs)
        ]
    if given:  # tokenised with a model's own SentencePiece models (trainer.init)
        manifest["given_tokenizers"] = given_digests(given)
    return manifest


def prepare_dataset(
    cfg: DataConfig, given: Mapping[str, bytes] | None = None
) -> tuple[Path, dict[str, Any], bool]:
    """Build the processed folder of `cfg` unless it is up to date; `given`: SentencePiece
    models (serialized, by language) to tokenise with instead of training them, in a folder
    of their own (`DataConfig.folder_with`) whose manifest lists their sha256.

    One process builds while any other preparing the same folder waits for it (`folder.py`), then
    finds it built. Returns the folder, its manifest, and whether this call (re)built it.
    """
    inputs, hashes = [], []
    corpora = cfg.corpus_list()
    for entry in corpora:
        source = sources.source_of(entry.data)
        try:
            if not source.ranked and (entry.data.keep_top or entry.data.frequency_list):
                raise ConfigError(
                    f"data.keep_top, data.frequency_list: {entry.data.source} keeps every pair; "
                    "only a lexicon (attnmt.data.sources.CedictLexicon) ranks its entries"
                )
            paths = source.input_files(entry.data)
            found = [corpus.sha256_of(p) for p in paths]
            source.check(entry.data, paths, found)
        except (ConfigError, DataError) as error:
            if len(corpora) == 1:
                raise
            raise type(error)(f"{entry.key}: {error}") from None  # which entry's data.* key
        inputs.append((entry, paths))
        hashes += found
    folder, wanted = cfg.folder_with(given), fingerprint(cfg, hashes, given)
    if manifest := current_manifest(folder, wanted):
        return folder, manifest, False
    output_path(folder.parent, "data.processed_dir", folder=True)
    with building(folder):
        if manifest := current_manifest(folder, wanted):
            return folder, manifest, False  # built by the process this one waited for
        if folder.is_dir():
            log.info("%s is out of date: rebuilding", folder)
        for stale in folder.parent.glob(f".{folder.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # its owner is gone: this one holds the lock
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        try:
            manifest = _build(cfg, inputs, hashes, tmp, given)
            (tmp / "manifest.json").write_text(
                json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            move_into_place(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder, manifest, True


def summary_table(manifest: dict[str, Any]) -> str:
    """A plain-text table of what `prepare_dataset` kept and dropped."""
    rows = [("pairs read", manifest["read"])]
    rows += [(f"dropped: {rule}", n) for rule, n in manifest["dropped"].items()]
    rows += [(f"{split} pairs", manifest["counts"][split]) for split in SPLITS]
    unknown = manifest.get("unknown_source_pieces", {})  # (folders built before it have none)
    rows += [(f"<unk> in {split} sources", n) for split, n in unknown.items()]
    rows += [
        (f"vocabulary {lang} ({v['model']})", v["size"]) for lang, v in manifest["vocab"].items()
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value:>8,}" for name, value in rows]
    rule = "-" * len(lines[0])
    title = f"dataset {manifest['src_lang']}->{manifest['tgt_lang']}"
    return "\n".join([title, rule, *lines, rule])
