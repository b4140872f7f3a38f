"""SentencePiece models: training them with attnmt's special ids (attnmt/vocab.py), loading them,
and decoding a model's output ids to text."""

from __future__ import annotations

import io
import logging
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from attnmt.errors import DataError
from attnmt.pieces import piece_groups
from attnmt.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

log = logging.getLogger(__name__)


# The seed of SentencePiece's sample of the training sentences (data.vocab.max_sentences).
SAMPLE_SEED = 1234


def train_sentencepiece(
    sentences: Iterable[str],
    count: int,
    model_file: Path,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    max_sentences: int,
    size_key: str,
    byte_fallback: bool = False,
) -> None:
    """Train a SentencePiece model on `sentences` (`count` of them, streamed) and write it to
    `model_file`, with attnmt's fixed special ids. Beyond `max_sentences` sentences it learns
    from a random sample of that many, drawn with a fixed seed so that reruns agree. With
    `byte_fallback`, a character outside the vocabulary is encoded as its UTF-8 bytes, never
    `<unk>`: 256 byte pieces (ids 4 to 259) that count in `vocab_size`.

    `size_key` is the config key that set `vocab_size`, named in the error when the data is too
    small for it.
    """
    # Trained from memory, so the model records no file path and the same sentences always
    # give the same bytes.
    model = io.BytesIO()
    if count > max_sentences:
        # Drawn here rather than by SentencePiece's own sampler, whose seed does not hold.
        chosen = set(random.Random(SAMPLE_SEED).sample(range(count), max_sentences))
        sentences = (sentence for i, sentence in enumerate(sentences) if i in chosen)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            byte_fallback=byte_fallback,
            # One thread: the same input then gives byte-identical models.
            num_threads=1,
            minloglevel=2,
        )
    except RuntimeError as error:
        sampled = f" (a sample of {max_sentences:,})" if count > max_sentences else ""
        bytes_counted = " (256 of them byte pieces: data.vocab.byte_fallback)" * byte_fallback
        raise DataError(
            f"{size_key}={vocab_size}{bytes_counted}: SentencePiece cannot build this "
            f"vocabulary from {count:,} training sentences{sampled}: {error}"
        ) from None
    model_file.write_bytes(model.getvalue())


def load_sentencepiece(path: Path) -> spm.SentencePieceProcessor:
    """Load a trained model and check that it uses attnmt's special ids."""
    if not Path(path).is_file():
        raise DataError(f"{path}: SentencePiece model not found")
    model = spm.SentencePieceProcessor(model_file=str(path))
    check_special_ids(model, str(path))
    return model


def check_special_ids(model: spm.SentencePieceProcessor, where: str) -> None:
    """Refuse a SentencePiece model (read from `where`) whose special ids are not attnmt's."""
    ids = (model.pad_id(), model.unk_id(), model.bos_id(), model.eos_id())
    if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise DataError(f"{where}: special ids (pad, unk, bos, eos) are {ids}, expected 0..3")


def decode(sp: spm.SentencePieceProcessor, ids: Sequence[int]) -> str:
    """The text of piece `ids`, as `sp.decode` writes it, less any byte piece that is part of
    no whole UTF-8 character (`attnmt.pieces`): a model with byte fallback may emit a broken
    byte sequence, which is dropped rather than shown as U+FFFD."""
    ids = list(ids)
    broken = {g.start for g in piece_groups([sp.id_to_piece(i) for i in ids]) if g.broken}
    return sp.decode([i for k, i in enumerate(ids) if k not in broken])  # (broken: one piece)
