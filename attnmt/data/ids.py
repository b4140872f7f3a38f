"""Token ids on disk: one flat array of ids and one array of offsets per split and language.

`{split}.{lang}.tokens.npy` holds the ids of every sentence one after the other (uint16 when the
vocabulary fits, else int32), without BOS or EOS; `{split}.{lang}.offsets.npy` (int64, one more
than the sentence count) says where each starts, so sentence i is tokens[offsets[i]:offsets[i+1]].
Both are plain .npy files, loaded memory-mapped: nothing is re-tokenised at train time and a
large corpus costs address space, not memory. A dataset of several corpora adds the corpus of
each training pair (`mix.py`).
"""

from __future__ import annotations

import shutil
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attnmt.errors import DataError


class IdsWriter:
    """Writes the ids of one split and language as the tokens/offsets pair described above,
    chunk by chunk, holding only the sentence lengths (8 bytes each) until it closes.

    with IdsWriter(folder, "train", "en", vocab_size) as ids:
        ids.add(chunk_of_sentences)
    """

    def __init__(self, folder: Path, split: str, lang: str, vocab_size: int) -> None:
        self.tokens_path = folder / f"{split}.{lang}.tokens.npy"
        self.offsets_path = folder / f"{split}.{lang}.offsets.npy"
        self.dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
        self.lengths = array("q")
        self.body = self.tokens_path.with_name(self.tokens_path.name + ".body")
        self.handle = open(self.body, "wb")  # noqa: SIM115 (closed by __exit__)

    def add(self, sentences: Sequence[Sequence[int]]) -> None:
        """Append sentences (lists of ids, without BOS or EOS)."""
        self.lengths.extend(len(s) for s in sentences)
        flat = [token for sentence in sentences for token in sentence]
        np.asarray(flat, dtype=self.dtype).tofile(self.handle)

    def __enter__(self) -> IdsWriter:
        return self

    def __exit__(self, *error: object) -> None:
        self.handle.close()
        if error[0] is None:
            lengths = np.frombuffer(self.lengths, dtype=np.int64)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            header = {
                "descr": np.lib.format.dtype_to_descr(np.dtype(self.dtype)),
                "fortran_order": False,
                "shape": (int(offsets[-1]),),
            }
            with open(self.tokens_path, "wb") as out, open(self.body, "rb") as body:
                np.lib.format.write_array_header_1_0(out, header)
                shutil.copyfileobj(body, out)
            np.save(self.offsets_path, offsets)
        self.body.unlink(missing_ok=True)


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
