"""Translating many sentences: batching by length, search, and the input order restored."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
from sentencepiece import SentencePieceProcessor

from attnmt.data.corpus import chunks, normalize, sha256_of
from attnmt.data.dataset import chunk_by_tokens, pad
from attnmt.data.tokenizer import EOS_ID, load_sentencepiece
from attnmt.errors import CheckpointError
from attnmt.model.seq2seq import Seq2Seq, build_model
from attnmt.search import Hypothesis, beam_search, greedy, max_lengths
from attnmt.train.checkpoint import load_checkpoint

log = logging.getLogger(__name__)

BLOCK_LINES = 10_000  # input lines sorted by length and translated together


@dataclass(frozen=True)
class SearchConfig:
    """How to search: beam size (1: greedy), n-best, length limits and penalty, batch size."""

    beam_size: int = 1
    n_best: int = 1
    alpha: float = 1.0
    max_length_a: float = 1.5
    max_length_b: int = 10
    batch_tokens: int = 4096


@torch.no_grad()
def translate_ids(
    model: Seq2Seq,
    sources: Sequence[np.ndarray],
    search: SearchConfig,
    device: torch.device,
    keep_attention: bool = False,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each source (ids without EOS), in input order."""
    model.eval()
    lengths = np.array([len(s) + 1 for s in sources])
    results: list[list[Hypothesis]] = [[] for _ in sources]
    by_length = np.argsort(lengths, kind="stable")
    for indices in chunk_by_tokens(by_length, lengths, search.batch_tokens):
        source = pad([sources[i] for i in indices], None, EOS_ID).to(device)
        source_lengths = torch.from_numpy(lengths[indices])
        limits = max_lengths(source_lengths, search.max_length_a, search.max_length_b)
        if search.beam_size == 1:
            found = [[h] for h in greedy(model, source, source_lengths, limits, keep_attention)]
        else:
            found = beam_search(
                model,
                source,
                source_lengths,
                limits,
                search.beam_size,
                search.alpha,
                keep_attention,
                search.n_best,
            )
        for index, hypotheses in zip(indices.tolist(), found, strict=True):
            for hypothesis in hypotheses:
                if hypothesis.attention is not None:  # drop the batch's padding columns
                    hypothesis.attention = hypothesis.attention[:, : lengths[index]].cpu()
            results[index] = hypotheses[: search.n_best]
    return results


@dataclass
class LoadedModel:
    """A trained model with its tokenizers, ready to translate."""

    model: Seq2Seq
    config: dict
    source_sp: SentencePieceProcessor
    target_sp: SentencePieceProcessor
    src_lang: str
    tgt_lang: str
    dataset_folder: Path  # the processed folder it was trained on (holds its tokenizers)


def load_model(path: Path, device: torch.device) -> LoadedModel:
    """The model of a checkpoint, with the SentencePiece models it was trained with."""
    saved = load_checkpoint(path, device, mmap=True)  # the weights; the optimizer's stay on disk
    config = saved["config"]
    src_lang, tgt_lang = config["data"]["src_lang"], config["data"]["tgt_lang"]
    tokenizers = {}
    for lang in (src_lang, tgt_lang):
        entry = saved["tokenizers"][lang]
        sp_path = Path(entry["path"])
        if not sp_path.is_file() or sha256_of(sp_path) != entry["sha256"]:
            raise CheckpointError(
                f"{path}: its {lang} SentencePiece model {sp_path} is missing or changed since "
                "training; rebuild the dataset with the training run's data config"
            )
        tokenizers[lang] = load_sentencepiece(sp_path)
    source_sp, target_sp = tokenizers[src_lang], tokenizers[tgt_lang]
    model = build_model(config, source_sp.get_piece_size(), target_sp.get_piece_size())
    model.load_state_dict(saved["model"])
    folder = Path(saved["tokenizers"][src_lang]["path"]).parent
    return LoadedModel(
        model.to(device).eval(), config, source_sp, target_sp, src_lang, tgt_lang, folder
    )


@dataclass
class Translation:
    """The translations of one input line, best first."""

    source_pieces: list[str]
    texts: list[str]
    hypotheses: list[Hypothesis]
    truncated: bool = False

    def target_pieces(self, sp: SentencePieceProcessor) -> list[str]:
        """The best hypothesis's pieces, one per attention row (EOS included when it ended so)."""
        if not self.hypotheses:
            return []
        best = self.hypotheses[0]
        pieces = [sp.id_to_piece(i) for i in best.ids]
        ended = best.attention is None or best.attention.shape[0] > len(best.ids)
        return pieces + ["</s>"] if ended else pieces


def translate_lines(
    loaded: LoadedModel,
    lines: Sequence[str],
    search: SearchConfig,
    device: torch.device,
    max_input_length: int,
    keep_attention: bool = False,
    first_line: int = 1,
) -> list[Translation]:
    """Translate raw text lines (normalised as in training); an empty line gives no output.
    `first_line` is the number of lines[0] in the input, for warnings."""
    pieces = [
        loaded.source_sp.encode(normalize(line, loaded.src_lang), out_type=int) for line in lines
    ]
    truncated = [len(p) > max_input_length for p in pieces]
    for i, cut in enumerate(truncated):
        if cut:
            log.warning(
                "line %d: %d pieces, truncated to %d (max_input_length)",
                first_line + i,
                len(pieces[i]),
                max_input_length,
            )
    filled = [i for i, p in enumerate(pieces) if p]
    sources = [np.array(pieces[i][:max_input_length], dtype=np.int64) for i in filled]
    found = translate_ids(loaded.model, sources, search, device, keep_attention) if sources else []
    results = [Translation([], [""], [], truncated[i]) for i in range(len(lines))]
    for i, hypotheses in zip(filled, found, strict=True):
        source_pieces = [loaded.source_sp.id_to_piece(t) for t in pieces[i][:max_input_length]]
        texts = [loaded.target_sp.decode(h.ids) for h in hypotheses]
        results[i] = Translation(source_pieces + ["</s>"], texts, hypotheses, truncated[i])
    return results


def write_translations(
    results: Sequence[Translation], out: TextIO, n_best: int, first: int = 0
) -> None:
    """One line per input; with n_best > 1, 'line ||| text ||| score' rows, best first, lines
    counted from `first` (0 for the first input line)."""
    for number, result in enumerate(results, start=first):
        if n_best == 1:
            out.write(result.texts[0] + "\n")
            continue
        for text, hypothesis in zip(result.texts, result.hypotheses, strict=False):
            out.write(f"{number} ||| {text} ||| {hypothesis.score:.4f}\n")


def translate_stream(
    loaded: LoadedModel,
    lines: Iterable[str],
    search: SearchConfig,
    device: torch.device,
    max_input_length: int,
    out: TextIO,
    n_best: int,
    keep: bool = False,
) -> list[Translation]:
    """Translate `lines` a block of BLOCK_LINES at a time, writing each block's translations
    before reading the next, so an input of any size streams through. Returns the translations
    (with their attention) only when `keep`."""
    kept: list[Translation] = []
    done = 0
    for block in chunks(lines, BLOCK_LINES):
        results = translate_lines(loaded, block, search, device, max_input_length, keep, done + 1)
        write_translations(results, out, n_best, done)
        done += len(block)
        if keep:
            kept.extend(results)
    return kept


def save_attention(results: Sequence[Translation], loaded: LoadedModel, path: Path) -> None:
    """An .npz with, for sentence i, `attention_i` (target x source, the best hypothesis's
    weights; EOS rows and columns included), `source_i` and `target_i` (the pieces)."""
    arrays = {}
    for i, result in enumerate(results):
        if not result.hypotheses:
            continue
        arrays[f"attention_{i}"] = result.hypotheses[0].attention.numpy()
        arrays[f"source_{i}"] = np.array(result.source_pieces)
        arrays[f"target_{i}"] = np.array(result.target_pieces(loaded.target_sp))
    np.savez_compressed(path, **arrays)


def plot_attention(results: Sequence[Translation], loaded: LoadedModel, folder: Path) -> None:
    """One heatmap PNG per translated sentence: folder/attention_{i}.png."""
    from attnmt.plot import attention_heatmap  # matplotlib adds 0.2 s to every start otherwise

    folder.mkdir(parents=True, exist_ok=True)
    for i, result in enumerate(results):
        if result.hypotheses:
            weights = result.hypotheses[0].attention.numpy()
            target = result.target_pieces(loaded.target_sp)
            attention_heatmap(
                weights[: len(target)],
                result.source_pieces,
                target,
                folder / f"attention_{i}.png",
                result.texts[0],
            )
