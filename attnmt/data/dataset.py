"""Token ids on disk: one flat array of ids and one array of offsets per split and language.

`{split}.{lang}.tokens.npy` holds the ids of every sentence one after the other (uint16 when the
vocabulary fits, else int32), without BOS or EOS; `{split}.{lang}.offsets.npy` (int64, one more
than the sentence count) says where each starts, so sentence i is tokens[offsets[i]:offsets[i+1]].
Both are plain .npy files, loaded memory-mapped: nothing is re-tokenised at train time and a
large corpus costs address space, not memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attnmt.errors import DataError


def write_ids(folder: Path, split: str, lang: str, sentences: Sequence[Sequence[int]]) -> None:
    """Write the ids of `sentences` as the tokens/offsets pair described above."""
    lengths = np.fromiter((len(s) for s in sentences), dtype=np.int64, count=len(sentences))
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = [token for sentence in sentences for token in sentence]
    largest = max(flat, default=0)
    dtype = np.uint16 if largest <= np.iinfo(np.uint16).max else np.int32
    np.save(folder / f"{split}.{lang}.tokens.npy", np.asarray(flat, dtype=dtype))
    np.save(folder / f"{split}.{lang}.offsets.npy", offsets)


class TokenIds:
    """The memory-mapped ids of one split and language; `ids[i]` is sentence i as an array."""

    def __init__(self, folder: Path, split: str, lang: str) -> None:
        paths = [folder / f"{split}.{lang}.{part}.npy" for part in ("tokens", "offsets")]
        for path in paths:
            if not path.is_file():
                raise DataError(f"{path}: token ids not found; run attnmt-prepare first")
        self.tokens = np.load(paths[0], mmap_mode="r")
        self.offsets = np.load(paths[1], mmap_mode="r")
        self.lengths = np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.tokens[self.offsets[index] : self.offsets[index + 1]]
