"""The `data` config group as typed settings: where a corpus comes from, how it is split,
cleaned and tokenised, and the processed folder its settings name. Every default lives in
configs/data/*.yaml; these classes are the schema."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from attnmt.config import checked, in_range, to_dict
from attnmt.data.corpus import LANGUAGES
from attnmt.errors import ConfigError

# Bump when the pipeline's output changes for the same config and input.
PIPELINE_VERSION = 1


# The range of each numeric key (None: unbounded on that side).
DATA_RANGES = {
    "dev_size": (0, None),
    "test_size": (0, None),
    "seed": (0, 2**32 - 1),
    "max_length": (1, None),
    "max_ratio": (1.0, None),
}
VOCAB_RANGES = {
    "src_size": (8, None),  # past the 4 special pieces; SentencePiece names a size too large
    "tgt_size": (8, None),
    "joint_size": (8, None),
    "max_sentences": (1, None),
}


@dataclass(frozen=True)
class VocabConfig:
    """SentencePiece settings: separate models per language unless `joint`; `byte_fallback`:
    the Chinese model (or the joint one) spells a character outside its vocabulary in UTF-8
    byte pieces instead of `<unk>`."""

    joint: bool
    src_size: int
    tgt_size: int
    joint_size: int
    model_type: str
    coverage: dict[str, float]
    max_sentences: int
    byte_fallback: bool = False  # (checkpoints from before the key have none)


# The data keys that say where a corpus's pairs come from: what each entry of data.corpora sets.
CORPUS_KEYS = ("source", "raw_path", "url", "sha256", "en_path", "zh_path", "split_dir")
# The keys that say which entries a lexicon keeps (sources.CedictLexicon), with their types.
LEXICON_KEYS = {"frequency_list": str | None, "keep_top": int | None}


@dataclass(frozen=True)
class DataConfig:
    """The `data` config group; see configs/data/*.yaml for what each key means."""

    name: str
    source: str
    raw_path: str | None
    url: str | None
    sha256: str | None
    en_path: str | None
    zh_path: str | None
    split_dir: str | None
    src_lang: str
    tgt_lang: str
    processed_dir: str
    dev_size: int
    test_size: int
    seed: int
    max_length: int
    max_ratio: float
    vocab: VocabConfig
    corpora: list[dict[str, Any]] | None = None  # several corpora with weights: `Corpus`
    # A lexicon's entries: the `keep_top` most common headwords by `frequency_list` (`wordfreq`:
    # that package's Chinese list; else a file of `word count` lines); null: every entry.
    frequency_list: str | None = None
    keep_top: int | None = None

    def __post_init__(self) -> None:
        for key in ("name", "processed_dir"):
            if not getattr(self, key):
                raise ConfigError(f"data.{key} is empty: it names the processed folder")
        for key, (low, high) in DATA_RANGES.items():
            in_range(f"data.{key}", getattr(self, key), low, high)
        for key, (low, high) in VOCAB_RANGES.items():
            in_range(f"data.vocab.{key}", getattr(self.vocab, key), low, high)
        if self.keep_top is not None:
            in_range("data.keep_top", self.keep_top, 1, None)
            if not self.frequency_list:
                raise ConfigError(
                    f"data.keep_top={self.keep_top} needs data.frequency_list: wordfreq, or a "
                    "file of `word count` lines that ranks the headwords"
                )
        for lang, coverage in self.vocab.coverage.items():
            key = f"data.vocab.coverage.{lang}"
            in_range(key, checked(coverage, float, key), 0.5, 1.0)
        for key in ("src_lang", "tgt_lang"):
            if getattr(self, key) not in LANGUAGES:
                raise ConfigError(f"data.{key}={getattr(self, key)!r}: must be 'zh' or 'en'")
        if self.src_lang == self.tgt_lang:
            raise ConfigError(f"data.src_lang and data.tgt_lang are both {self.src_lang!r}")
        if self.vocab.model_type not in ("unigram", "bpe"):
            raise ConfigError(
                f"data.vocab.model_type={self.vocab.model_type!r}: must be 'unigram' or 'bpe'"
            )
        self.corpus_list()  # refuses a bad list now, before any work

    @property
    def folder(self) -> Path:
        """Where the processed dataset of this config lives: `{name}.{src}-{tgt}.{hash}`, the
        hash of every setting (but where it goes), so that two configs of one corpus (say two
        vocabulary sizes) never rebuild each other's folder under a run that trained on it."""
        return self.folder_with(None)

    def folder_with(self, given: Mapping[str, bytes] | None) -> Path:
        """The processed folder of this config tokenised with the `given` SentencePiece models
        (by language; None: models trained on its own split, `folder`)."""
        digest = hashlib.sha256(json.dumps(self.settings(given), sort_keys=True).encode())
        name = f"{self.name}.{self.src_lang}-{self.tgt_lang}.{digest.hexdigest()[:8]}"
        return Path(self.processed_dir) / name

    def settings(self, given: Mapping[str, bytes] | None = None) -> dict[str, Any]:
        """The settings that shape the output: all but `processed_dir`, with the version of the
        pipeline, and the sha256 of each given SentencePiece model."""
        settings = to_dict(self)
        settings.pop("processed_dir")
        if settings["corpora"] is None:  # one corpus: the settings (and folder) of before
            settings.pop("corpora")
        if not settings["vocab"]["byte_fallback"]:  # off: the settings (and folder) of before
            settings["vocab"].pop("byte_fallback")
        for key in LEXICON_KEYS:  # unset: the settings (and folder) of before
            if settings[key] is None:
                settings.pop(key)
        settings["pipeline_version"] = PIPELINE_VERSION
        if given:
            settings["given_tokenizers"] = given_digests(given)
        return settings

    def corpus_list(self) -> list[Corpus]:
        """The corpora this config reads (see `Corpus`): data.corpora's, or this config's one
        corpus (weight 1, evaluated) when it is null."""
        if self.corpora is None:
            return [Corpus(self, 1.0, True, "data")]
        if not isinstance(self.corpora, list | tuple) or not self.corpora:
            raise ConfigError(
                f"data.corpora={self.corpora!r}: a list of corpora (each a mapping with its "
                "source keys and a weight, one with evaluate: true), or null for one corpus"
            )
        found = [self._corpus(i, entry) for i, entry in enumerate(self.corpora)]
        marked = [c for c in found if c.evaluate]
        if len(marked) != 1:
            raise ConfigError(
                f"data.corpora: {len(marked)} corpora say evaluate: true; exactly one must (it "
                "alone gives the dev and test splits)"
            )
        if not any(c.weight for c in found):
            raise ConfigError("data.corpora: every weight is 0; the evaluated corpus needs one")
        if not marked[0].weight:
            raise ConfigError(
                f"{marked[0].key}.weight=0: the evaluated corpus's weight sets the others' "
                "share of an epoch; it must be above 0"
            )
        return found

    def _corpus(self, index: int, entry: Any) -> Corpus:
        key = f"data.corpora[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{key}={entry!r}: expected a mapping (source keys, weight)")
        valid = [*CORPUS_KEYS, *LEXICON_KEYS, "weight", "evaluate"]
        unknown = sorted(set(entry) - set(valid))
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}: unknown key; valid: {', '.join(valid)}")
        if "weight" not in entry:
            raise ConfigError(f"{key}.weight is required")
        weight = float(checked(entry["weight"], float, f"{key}.weight"))
        in_range(f"{key}.weight", weight, 0.0, 1e6)
        evaluate = checked(entry.get("evaluate", False), bool, f"{key}.evaluate")
        # An entry of data.source's own kind takes data's location keys it does not set (so
        # data.raw_path still places the default corpus); any other starts from none.
        source = checked(entry.get("source", self.source), str, f"{key}.source")
        inherit = source == self.source
        values = {
            name: checked(
                entry.get(name, getattr(self, name) if inherit else None),
                str | None,
                f"{key}.{name}",
            )
            for name in CORPUS_KEYS
        }
        for name, kind in LEXICON_KEYS.items():
            values[name] = checked(entry.get(name), kind, f"{key}.{name}")
        try:
            data = replace(self, corpora=None, **values)
        except ConfigError as error:  # a lexicon key's range: say which entry
            raise ConfigError(f"{key}: {error}") from None
        return Corpus(data, weight, evaluate, key)


@dataclass(frozen=True)
class Corpus:
    """One corpus of a dataset: the data config that reads it (data's, with the entry's own
    source keys), its weight (an epoch holds weight / the evaluated corpus's weight times as
    many of its pairs as the evaluated corpus has training pairs), and whether it alone gives
    the dev and test splits (`evaluate`). `key` names it in errors."""

    data: DataConfig
    weight: float
    evaluate: bool
    key: str


def given_digests(given: Mapping[str, bytes]) -> dict[str, str]:
    """The sha256 of each given SentencePiece model, by language."""
    return {lang: hashlib.sha256(model).hexdigest() for lang, model in sorted(given.items())}


def spm_model_name(cfg: DataConfig, lang: str) -> str:
    """The file name of the SentencePiece model that tokenises `lang`."""
    return "spm.joint.model" if cfg.vocab.joint else f"spm.{lang}.model"
