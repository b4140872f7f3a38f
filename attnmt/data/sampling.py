"""Subword regularization: the training pairs segmented afresh every epoch.

A SentencePiece model can segment a sentence many ways; training on a sampled segmentation
each time it sees the sentence (Kudo 2018 for unigram models, BPE-dropout for bpe ones) makes
the model robust to segmentation and acts as data augmentation, which helps most on a small
corpus. Only the training split is sampled; dev and test keep the one best segmentation, as
translation does. The text never changes: every sampled segmentation decodes back to it.

`SampledData` is a `ParallelData` whose ids are re-drawn when an epoch starts, from the
split's text in the processed folder. A (seed, epoch) gives the same segmentation again, so a
resumed run sees what it would have seen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import sentencepiece as spm

from attnmt.data.corpus import read_own_lines
from attnmt.data.dataset import ParallelData
from attnmt.data.guide import AlignmentGuide
from attnmt.errors import DataError


class SampledIds:
    """One epoch's ids of one split and language, shaped like `TokenIds`."""

    def __init__(self, sentences: list[list[int]]) -> None:
        self.sentences = [np.asarray(s, dtype=np.int32) for s in sentences]
        self.lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))

    def __len__(self) -> int:
        return len(self.sentences)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.sentences[index]


class SampledData(ParallelData):
    """Training pairs whose segmentation is sampled anew at each epoch (see the module).

    `alpha`: for unigram models the smoothing of the sampling distribution (smaller: more
    varied), for bpe models the dropout probability of each merge. `nbest_size`: unigram
    models sample among the best n segmentations (-1: among all of them).
    """

    def __init__(
        self,
        folder: Path,
        split: str,
        models: dict[str, spm.SentencePieceProcessor],
        src_lang: str,
        tgt_lang: str,
        alpha: float,
        nbest_size: int,
        seed: int,
    ) -> None:
        super().__init__(folder, split, src_lang, tgt_lang)
        self.langs, self.models = (src_lang, tgt_lang), models
        self.alpha, self.nbest_size, self.seed = alpha, nbest_size, seed
        self.texts = {lang: list(read_own_lines(folder / f"{split}.{lang}")) for lang in self.langs}
        for lang, lines in self.texts.items():
            if len(lines) != len(self):
                raise DataError(
                    f"{folder / f'{split}.{lang}'}: {len(lines):,} lines for {len(self):,} "
                    "pairs of token ids; rebuild the dataset"
                )
        self.epoch: int | None = None

    def sample(self, epoch: int) -> None:
        """Draw epoch `epoch`'s segmentation of both sides (kept until another is asked)."""
        if epoch == self.epoch:
            return
        spm.set_random_generator_seed(self.seed * 100_003 + epoch)
        options = {
            "enable_sampling": True,
            "alpha": self.alpha,
            "nbest_size": self.nbest_size,
            "num_threads": 1,  # one thread: the same seed gives the same draws
        }
        if self.guide is not None:  # with each piece's span, for the guide
            sides = self.guide.encode(self.models, **options)
        else:
            sides = [
                self.models[lang].encode(self.texts[lang], out_type=int, **options)
                for lang in self.langs
            ]
        self.source, self.target = SampledIds(sides[0]), SampledIds(sides[1])  # type: ignore[assignment]
        self.epoch = epoch

    def follow(self, guide: AlignmentGuide, models: dict[str, spm.SentencePieceProcessor]) -> None:
        """Guide the batches (guided alignment); the next epoch is drawn with piece spans."""
        self.guide, self.epoch = guide, None

    def token_batches(self, batch_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """Epoch `epoch`'s batches, of its sampled segmentation."""
        self.sample(epoch)
        return super().token_batches(batch_tokens, seed, epoch)
