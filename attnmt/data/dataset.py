"""Batches for training: pairs of token ids (see `ids.py`) grouped by length and padded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
from torch import Tensor

from attnmt.data.guide import AlignmentGuide
from attnmt.data.ids import TokenIds
from attnmt.data.mix import CorpusMix
from attnmt.errors import DataError
from attnmt.vocab import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    """One padded batch; rows sorted by target length, longest first.

    previous = [BOS, y_1..y_m] feeds the decoder, target = [y_1..y_m, EOS] is what it predicts.
    """

    source: Tensor  # (B, S) ids, PAD after each sentence's EOS
    source_lengths: Tensor  # (B,)
    previous: Tensor  # (B, T)
    target: Tensor  # (B, T), PAD at padding
    guide: Tensor | None = None  # (B, T, S) guided alignment's target attention (`guide.py`)

    @property
    def target_tokens(self) -> int:
        return int((self.target != PAD_ID).sum())

    @staticmethod
    def padding_share(batches: Sequence[Batch]) -> float:
        """The share of padding in the batches' source and target tensors."""
        cells = sum(b.source.numel() + b.target.numel() for b in batches)
        real = sum(int(b.source_lengths.sum()) + b.target_tokens for b in batches)
        return round(1 - real / cells, 4)

    def to(self, device: torch.device) -> Batch:
        """The batch on `device`; to CUDA through pinned memory, without blocking the host."""

        def move(x: Tensor) -> Tensor:
            if device.type != "cuda":
                return x.to(device)
            return x.pin_memory().to(device, non_blocking=True)

        return replace(
            self,
            source=move(self.source),
            previous=move(self.previous),
            target=move(self.target),
            guide=None if self.guide is None else move(self.guide),
        )


def pad(sentences: Sequence[np.ndarray], before: int | None, after: int | None) -> Tensor:
    """Sentences of ids as a (B, longest) tensor padded with PAD, each with an optional id
    added before (BOS) and after (EOS). One numpy scatter, not a copy per sentence."""
    lengths = np.fromiter((len(s) for s in sentences), dtype=np.int64, count=len(sentences))
    start = int(before is not None)
    out = np.full(
        (len(sentences), int(lengths.max()) + start + (after is not None)), PAD_ID, dtype=np.int64
    )
    rows = np.repeat(np.arange(len(sentences)), lengths)
    # each id's position in its sentence: its position overall less where its sentence starts
    columns = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, columns + start] = np.concatenate(sentences)
    if before is not None:
        out[:, 0] = before
    if after is not None:
        out[np.arange(len(sentences)), lengths + start] = after
    return torch.from_numpy(out)


def chunk_by_tokens(order: np.ndarray, sizes: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Cut `order` (indices, usually sorted by length) into consecutive batches whose count x
    largest size stays within `batch_tokens` (a longer single item is a batch of its own)."""
    batches, start, longest = [], 0, 0
    for position, index in enumerate(order):
        longest_with = max(longest, sizes[index])
        if position > start and longest_with * (position - start + 1) > batch_tokens:
            batches.append(order[start:position])
            start, longest_with = position, sizes[index]
        longest = longest_with
    if len(order):
        batches.append(order[start:])
    return batches


class ParallelData:
    """The source and target ids of one split, and the batches they are read in (with a guide
    for guided alignment once `follow` gave one)."""

    guide: AlignmentGuide | None = None

    def __init__(self, folder: Path, split: str, src_lang: str, tgt_lang: str) -> None:
        self.source = TokenIds(folder, split, src_lang)
        self.target = TokenIds(folder, split, tgt_lang)
        self.mix = CorpusMix.read(folder) if split == "train" else None
        if len(self.source) != len(self.target):
            raise DataError(
                f"{folder}: {split}.{src_lang} and {split}.{tgt_lang} differ in "
                f"length ({len(self.source)} vs {len(self.target)}); rebuild it"
            )

    def __len__(self) -> int:
        return len(self.source)

    def follow(self, guide: AlignmentGuide, models: dict[str, spm.SentencePieceProcessor]) -> None:
        """Give each batch `guide`'s rows, with the pieces of this split's own segmentation."""
        sides = guide.encode(models)
        for ids, tokens, lang in zip(sides, (self.source, self.target), guide.langs, strict=True):
            made = np.fromiter(map(len, ids), np.int64, len(ids))
            if len(made) != len(tokens.lengths) or not np.array_equal(made, tokens.lengths):
                wrong = np.flatnonzero(made[: len(tokens.lengths)] != tokens.lengths[: len(made)])
                line = int(wrong[0]) + 1 if len(wrong) else min(len(made), len(tokens.lengths)) + 1
                raise DataError(
                    f"{guide.folder / f'train.{lang}'}, line {line}: the token ids differ from "
                    f"what {lang}'s SentencePiece model makes of it; rebuild the dataset"
                )
        self.guide = guide

    def batch(self, indices: np.ndarray) -> Batch:
        """The padded batch of pairs `indices`, rows sorted by target length, longest first."""
        order = np.argsort(-self.target.lengths[indices], kind="stable")
        indices = indices[order]
        source = pad([self.source[i] for i in indices], None, EOS_ID)
        targets = [self.target[i] for i in indices]
        target = pad(targets, None, EOS_ID)
        return Batch(
            source=source,
            source_lengths=torch.from_numpy(self.source.lengths[indices] + 1),
            previous=pad(targets, BOS_ID, None),
            target=target,
            guide=None
            if self.guide is None
            else self.guide.batch(indices, target.shape[1], source.shape[1]),
        )

    def target_tokens(self, batches: Sequence[np.ndarray]) -> int:
        """The target tokens (EOS included) of the pairs in `batches`."""
        return int(sum((self.target.lengths[b] + 1).sum() for b in batches))

    def token_batches(self, batch_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """The pairs of one epoch grouped into batches of similar lengths, in a shuffled order.

        Each batch holds at most `batch_tokens` padded tokens of its longer side (sentences x
        the longest source or target, EOS included), like JoeyNMT's token batches; sorting by
        length first keeps the padding small: by target length, then by source length, rising
        for even target lengths and falling for odd ones, so that a batch across two target
        lengths joins sources of like length. The same (seed, epoch) gives the same batches.
        With several corpora an epoch is the pairs `CorpusMix` draws for it.
        """
        rng = np.random.default_rng([seed, epoch])
        src_len, tgt_len = self.source.lengths + 1, self.target.lengths + 1
        jitter = rng.random(len(self))  # shuffles pairs of equal lengths
        snake = np.where(tgt_len % 2 == 0, src_len, -src_len)
        if self.mix is None:
            order = np.lexsort((jitter, snake, tgt_len))
        else:  # several corpora: this epoch's share of each (`CorpusMix`)
            chosen = self.mix.epoch_pairs(seed, epoch)
            jitter = rng.random(len(chosen))  # per position: repeats of a pair spread out
            order = chosen[np.lexsort((jitter, snake[chosen], tgt_len[chosen]))]
        batches = chunk_by_tokens(order, np.maximum(src_len, tgt_len), batch_tokens)
        rng.shuffle(batches)
        return batches
