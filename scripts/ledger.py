"""The scorer study's ledger: one small JSON file per finished run, committed, so that a study
can span days and machines and `make compare` trains and evaluates only the runs it lacks.

A run's key says which model it is: its seed, step budget, precision (bf16 and fp32 runs are
different entries), the processed dataset's fingerprint, the model-code version
(`attnmt.MODEL_CODE_VERSION`) and a digest of its resolved training config; beside them, how the
study asked for it: its variant and overrides. An entry whose key equals a run's in every field
of the model stands for that run, however it was asked for (`luong-nofeed+additive` is
`additive` once that decoder is the recipe's: the same resolved config); one that differs in any
of them is not reused. What the entry holds beside its key (docs/study/ledger/README.md):

    commit, cpu, device, torch       where and from what it trained
    kernels                          "C++" or "torch": what ran fp32's element-wise work
                                     (attnmt.model.native); absent or null before it, or bf16
    data_folder, vocab               the processed dataset's folder name, vocabulary sizes
    dev, test                        {bleu, chrf, stats}: corpus BLEU and chrF with beam 5, and
                                     sacrebleu's BLEU statistics of each sentence (attnmt.infer.
                                     significance.bleu_statistics), what the bootstrap resamples
    bleu_signature                   sacrebleu's BLEU signature
    aer, aer_low, aer_high, entropy  attention figures of the test split and the gold set
    minutes, train_tokens_per_s, decode_sent_per_s
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from attnmt.files import replaced_whole

SPLITS = ("dev", "test")
STATS_WIDTH = 10  # sacrebleu's BLEU statistics of a sentence
# What an entry holds beside its key; a file that lacks one is refused.
FIELDS = (
    "commit",
    "cpu",
    "device",
    "torch",
    "data_folder",
    "vocab",
    *SPLITS,
    "bleu_signature",
    "aer",
    "aer_low",
    "aer_high",
    "entropy",
    "minutes",
    "train_tokens_per_s",
    "decode_sent_per_s",
)
# Written where the run's figures have it; an entry from before a field existed lacks it.
OPTIONAL_FIELDS = ("kernels",)
SPLIT_FIELDS = ("bleu", "chrf", "stats")
# The figures that must be numbers (of the entry, and of each split).
NUMBERS = (
    "aer",
    "aer_low",
    "aer_high",
    "entropy",
    "minutes",
    "train_tokens_per_s",
    "decode_sent_per_s",
)


class LedgerError(Exception):
    """A ledger file that cannot be read as an entry; the message names it."""


@dataclass(frozen=True)
class RunKey:
    """Which model a run is, and how the study asked for it: two runs whose keys have the same
    `model()` train the same model."""

    variant: str  # how it was asked for
    seed: int
    steps: int
    precision: str  # what the run trains in: bf16, fp16 or fp32
    data: str  # the processed dataset's fingerprint (its manifest.json)
    model_code: int  # attnmt.MODEL_CODE_VERSION
    config: str  # sha256 of the resolved training config, less where files go
    overrides: tuple[str, ...]  # how it was asked for: its overrides, less where files go

    def model(self) -> tuple:
        """The fields that make the model: all but the variant and overrides, which the config
        digest already holds as what they resolved to."""
        return tuple(getattr(self, name) for name in MODEL_FIELDS)

    @classmethod
    def of(cls, values: dict[str, Any]) -> RunKey:
        return cls(**{**values, "overrides": tuple(values["overrides"])})

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overrides": list(self.overrides)}

    def file_name(self) -> str:
        """The entry's file: readable fields, then a digest of the whole key."""
        digest = hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode())
        variant = re.sub(r"[^A-Za-z0-9_.-]", "_", self.variant)
        return (
            f"{variant}.seed{self.seed}.{self.steps}steps.{self.precision}."
            f"{digest.hexdigest()[:12]}.json"
        )


KEY_FIELDS = tuple(RunKey.__dataclass_fields__)
MODEL_FIELDS = tuple(name for name in KEY_FIELDS if name not in ("variant", "overrides"))
KEY_TYPES = {
    "variant": str,
    "seed": int,
    "steps": int,
    "precision": str,
    "data": str,
    "model_code": int,
    "config": str,
    "overrides": list,
}


class Ledger:
    """The entries of a ledger folder (its *.json files), by the model their key names."""

    def __init__(self, folder: Path, entries: dict[tuple, tuple[Path, dict]]) -> None:
        self.folder = folder
        self.entries = entries  # by RunKey.model()

    @classmethod
    def read(cls, folder: Path) -> Ledger:
        """Every entry of `folder` (none if it does not exist yet), each checked."""
        ledger = cls(folder, {})
        ledger.read_new()
        return ledger

    def read_new(self) -> None:
        """Add the files of the folder not read yet; two files of one model are refused."""
        known = {path for path, _ in self.entries.values()}
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            if path in known:
                continue
            entry = read_entry(path)
            model = RunKey.of(entry["key"]).model()
            if model in self.entries:
                raise LedgerError(f"{path}: the same model as {self.entries[model][0]}; remove one")
            self.entries[model] = (path, entry)

    def find(self, key: RunKey) -> tuple[Path, dict] | None:
        """The file and entry of `key`'s model, if the ledger has it: read when the ledger was,
        or written since (by another study sharing the folder, as `--train-seeds` lets machines
        and cores do), so that no run is trained twice."""
        if key.model() not in self.entries:
            self.read_new()
        return self.entries.get(key.model())

    def write(self, key: RunKey, figures: dict) -> tuple[Path, dict]:
        """Add the entry of `key` (replacing a file of the same name); its file and entry. An
        entry of the same model that another study wrote meanwhile is kept instead, so the
        folder never holds one model twice. The file appears whole (`replaced_whole`), so that a
        study reading the folder meanwhile never sees half of it."""
        self.read_new()
        path = self.folder / key.file_name()
        found = self.entries.get(key.model())
        if found and found[0] != path:
            return found
        entry = {"key": key.as_dict(), **{name: figures[name] for name in FIELDS}}
        entry |= {name: figures[name] for name in OPTIONAL_FIELDS if name in figures}
        with replaced_whole(path) as file:
            file.write(entry_text(entry))
        # an entry edited in place under this name (another key) is this one now
        self.entries = {m: found for m, found in self.entries.items() if found[0] != path}
        self.entries[key.model()] = (path, entry)
        return path, entry


def entry_text(entry: dict) -> str:
    """The entry as indented JSON with each list of numbers on one line (a sentence's
    statistics), so that a file reads and diffs line by line."""

    def text(value: Any, depth: int) -> str:
        inner, outer = " " * (depth + 1), " " * depth
        if isinstance(value, dict) and value:
            items = [f"{inner}{json.dumps(k)}: {text(v, depth + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + f"\n{outer}}}"
        if isinstance(value, list) and not all(isinstance(v, int | float) for v in value):
            items = [f"{inner}{text(v, depth + 1)}" for v in value]
            return "[\n" + ",\n".join(items) + f"\n{outer}]"
        return json.dumps(value, ensure_ascii=False)

    return text(entry, 0) + "\n"


def read_entry(path: Path) -> dict:
    """One ledger file, refused with a LedgerError naming it (and what is wrong) unless it is
    a whole entry."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise LedgerError(f"{path}: cannot be read ({error})") from None
    except json.JSONDecodeError as error:
        raise LedgerError(f"{path}: not JSON ({error})") from None
    if not isinstance(entry, dict):
        raise LedgerError(f"{path}: not a ledger entry (a JSON object with a key)")
    missing = [name for name in ("key", *FIELDS) if name not in entry]
    if missing:
        raise LedgerError(f"{path}: missing {', '.join(missing)}")
    key = entry["key"]
    if not isinstance(key, dict) or sorted(key) != sorted(KEY_FIELDS):
        raise LedgerError(f"{path}: its key must have exactly {', '.join(KEY_FIELDS)}")
    for name, kind in KEY_TYPES.items():
        value = key[name]
        if name == "overrides":
            if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
                raise LedgerError(f"{path}: key.overrides must be a list of strings")
        elif not isinstance(value, kind) or isinstance(value, bool):
            raise LedgerError(f"{path}: key.{name} must be a {kind.__name__}, not {value!r}")
    for split in SPLITS:
        figures = entry[split]
        if not isinstance(figures, dict) or any(name not in figures for name in SPLIT_FIELDS):
            raise LedgerError(f"{path}: {split} must have {', '.join(SPLIT_FIELDS)}")
        for name in ("bleu", "chrf"):
            if not is_number(figures[name]):
                raise LedgerError(f"{path}: {split}.{name} must be a number")
        stats = figures["stats"]
        if not isinstance(stats, list) or not all(
            isinstance(row, list) and len(row) == STATS_WIDTH and all(map(is_count, row))
            for row in stats
        ):
            raise LedgerError(f"{path}: {split}.stats must hold {STATS_WIDTH} counts a sentence")
    for name in NUMBERS:
        if not is_number(entry[name]):
            raise LedgerError(f"{path}: {name} must be a number")
    return entry


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
