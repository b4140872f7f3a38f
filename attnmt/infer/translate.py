"""Translating text with a trained model: the `Translator` that every tool and the service use,
and the batching by length under it (search in `attnmt.infer.search`, batches joining a
running search in `attnmt.infer.batches`); paragraphs split into sentences
(`attnmt.data.sentences`) and their translations joined again."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import torch
from sentencepiece import SentencePieceProcessor

from attnmt.config import bounded, check_ranges
from attnmt.data.corpus import normalize
from attnmt.data.dataset import chunk_by_tokens, pad
from attnmt.data.sentences import join_sentences, split_paragraph
from attnmt.data.tokenizer import decode
from attnmt.data.units import Link
from attnmt.errors import CheckpointError, ConfigError
from attnmt.infer.align import Side, links_from_attention, piece_links
from attnmt.infer.batches import beam_search_batches, greedy_batches
from attnmt.infer.checkpoint import load_checkpoint, load_tokenizer
from attnmt.infer.ensemble import Ensemble
from attnmt.infer.fast import once_per_distinct
from attnmt.infer.hypothesis import Hypothesis
from attnmt.infer.score import PairScore, forced_decode, forced_log_probs
from attnmt.infer.search import SourceBatch, max_lengths
from attnmt.model.build import build_model
from attnmt.model.seq2seq import Seq2Seq
from attnmt.runtime import check_dtype, pick_device
from attnmt.runtime import quantize as quantize_model
from attnmt.vocab import EOS_ID, EOS_PIECE

log = logging.getLogger(__name__)


MAX_BEAM_SIZE = 128  # wider beams rank more candidates than the vocabulary may hold
MAX_OUTPUT_LENGTH = 1000  # pieces; a model that never ends stops here
# The next batch joins the running sentences once they hold under this share of batch_tokens
# (`attnmt.infer.batches`; docs/benchmarks.md has the measurement, made with beam search).
JOIN_BELOW = 0.5


@dataclass(frozen=True)
class SearchConfig:
    """How to search: beam size (1: greedy), n-best, length limits and penalty, how long an
    input may be (in pieces; longer ones are cut), and how many tokens a batch holds.

    The one place these settings have their defaults and ranges: a tool builds one from its
    command line, and a request or a call with settings of its own takes `changed` copy.
    """

    beam_size: int = bounded(1, MAX_BEAM_SIZE, default=5, help="1: greedy")
    n_best: int = bounded(default=1, help="hypotheses per sentence, best first (1 to beam_size)")
    alpha: float = bounded(default=1.0, help="GNMT length penalty ((5 + length) / 6)^alpha")
    coverage_penalty: float = bounded(
        0.0,
        None,
        default=0.0,
        help="GNMT coverage penalty beta (beam): + beta sum_i log min(attention to i, 1); 0: off",
    )
    max_length_a: float = bounded(
        0.0, 100.0, default=1.5, help="outputs stop at a * source length + b pieces"
    )
    max_length_b: int = bounded(1, MAX_OUTPUT_LENGTH, default=10, help="b of max_length_a")
    max_input_length: int = bounded(
        1, None, default=200, help="longer inputs (in pieces) are cut, with a warning"
    )
    batch_tokens: int = bounded(1, None, default=4096, help="padded tokens per batch")

    def __post_init__(self) -> None:
        check_ranges(self)
        if not 1 <= self.n_best <= self.beam_size:
            raise ConfigError(f"n_best={self.n_best}: must be 1 to beam_size ({self.beam_size})")

    def changed(self, **values: Any) -> SearchConfig:
        """A copy with `values` (a request's or a call's own settings) in place, checked
        like the original."""
        unknown = sorted(set(values) - {f.name for f in fields(self)})
        if unknown:
            raise ConfigError(f"no search setting {', '.join(unknown)}")
        return replace(self, **values) if values else self


@torch.no_grad()
def translate_ids(
    model: Seq2Seq | Ensemble,
    sources: Sequence[np.ndarray],
    search: SearchConfig,
    device: torch.device,
    keep_attention: bool = False,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each source (ids without EOS), in input order: sources
    sorted by length, cut into batches of `search.batch_tokens`, searched greedily or with
    beams, the next batch joining a batch's last running sentences (`greedy_batches`,
    `beam_search_batches`). A source that comes more than once is searched once
    (`fast.once_per_distinct`)."""
    model.eval()
    if not len(sources):
        return []

    def search_all(distinct: Sequence[np.ndarray]) -> list[list[Hypothesis]]:
        return search_batches(model, distinct, search, device, keep_attention)

    return once_per_distinct(sources, search_all)


def search_batches(
    model: Seq2Seq | Ensemble,
    sources: Sequence[np.ndarray],
    search: SearchConfig,
    device: torch.device,
    keep_attention: bool,
) -> list[list[Hypothesis]]:
    """`translate_ids` of sources that are all different."""
    lengths = np.array([len(s) + 1 for s in sources])
    by_length = np.argsort(lengths, kind="stable")
    batches = []
    for indices in chunk_by_tokens(by_length, lengths, search.batch_tokens):
        source = pad([sources[i] for i in indices], None, EOS_ID).to(device)
        source_lengths = torch.from_numpy(lengths[indices])
        limits = max_lengths(source_lengths, search.max_length_a, search.max_length_b)
        batches.append(SourceBatch(source, source_lengths, limits))
    join_below = int(search.batch_tokens * JOIN_BELOW)
    if search.beam_size == 1:
        found = [[h] for h in greedy_batches(model, batches, keep_attention, join_below)]
    else:
        found = beam_search_batches(
            model,
            batches,
            search.beam_size,
            search.alpha,
            keep_attention,
            search.n_best,
            search.coverage_penalty,
            join_below,
        )
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for index, hypotheses in zip(by_length.tolist(), found, strict=True):
        for hypothesis in hypotheses:
            if hypothesis.attention is not None:  # drop the batch's padding columns
                hypothesis.attention = hypothesis.attention[:, : lengths[index]].cpu()
        results[index] = hypotheses[: search.n_best]
    return results


@dataclass
class Candidate:
    """One translation of a sentence: text, score (log P over the length penalty), target
    pieces ("</s>" last when the output ended with it), and on request the attention weights,
    one row per target piece and one column per source piece."""

    text: str
    score: float
    target_pieces: list[str]
    attention: np.ndarray | None = None


@dataclass
class Translation:
    """The translations of one input sentence, best first (none for an empty line)."""

    source_pieces: list[str]  # the pieces the model read, "</s>" last
    hypotheses: list[Candidate]
    truncated: bool = False  # the input was longer than max_input_length and was cut

    @property
    def text(self) -> str:
        """The best translation ("" for an empty line)."""
        return self.hypotheses[0].text if self.hypotheses else ""


@dataclass
class Paragraph:
    """The translation of a paragraph split into sentences: each sentence's `Translation` (its
    n-best, pieces and attention), and their best translations joined."""

    sentences: list[str]  # the source's sentences, as split (normalised as in training)
    translations: list[Translation]  # one per sentence, in order
    text: str  # the best translations joined: a space between English sentences, none in Chinese

    @property
    def truncated(self) -> bool:
        """Whether a sentence was longer than max_input_length and was cut."""
        return any(t.truncated for t in self.translations)


def split_paragraphs(texts: Sequence[str], lang: str) -> list[list[str]]:
    """The sentences of each text of language `lang`, normalised as in training (none for a
    text of punctuation alone)."""
    return [split_paragraph(normalize(text, lang), lang) for text in texts]


def join_paragraphs(
    split: Sequence[Sequence[str]], translations: Sequence[Translation], lang: str
) -> list[Paragraph]:
    """The `Paragraph` of each text of `split` (its sentences), given the translations of all
    their sentences in order, joined as language `lang` joins sentences."""
    found, at = [], 0
    for sentences in split:
        mine = list(translations[at : at + len(sentences)])
        found.append(Paragraph(list(sentences), mine, join_sentences([t.text for t in mine], lang)))
        at += len(sentences)
    return found


class Translator:
    """A trained model with its tokenizers: text in, translations out.

    translator = Translator.load("best.pt", device="cpu")
    translator.translate(["我们明天去公园。"])[0].text  # beam search, SearchConfig's beam
    """

    def __init__(
        self,
        model: Seq2Seq | Ensemble,
        source_sp: SentencePieceProcessor,
        target_sp: SentencePieceProcessor,
        config: dict[str, Any],
        device: torch.device,
        dataset_folder: Path | None = None,
    ) -> None:
        self.model, self.config, self.device = model.to(device).eval(), config, device
        self.source_sp, self.target_sp = source_sp, target_sp
        self.src_lang, self.tgt_lang = config["data"]["src_lang"], config["data"]["tgt_lang"]
        self.dataset_folder = dataset_folder  # the processed data it was trained on, if known

    @classmethod
    def load(
        cls,
        path: str | Path | Sequence[str | Path],
        device: str | torch.device = "cpu",
        quantize: str | None = None,
        dtype: str = "float32",
    ) -> Translator:
        """The model of a checkpoint (or an export) with the tokenizers it was trained with;
        given several checkpoints, their ensemble (`attnmt.infer.ensemble`), which needs one pair of
        tokenizers. `device`: cpu, cuda, cuda:N or auto. `quantize="int8"`: int8 weights for
        faster CPU decoding (`attnmt.runtime.quantize`). `dtype="bfloat16"`: the weights cast to
        bf16 (CUDA, or a CPU with native bf16: `attnmt.runtime.check_dtype`); the search's
        log-softmax and scores stay fp32."""
        paths = [Path(path)] if isinstance(path, str | Path) else [Path(p) for p in path]
        if not paths:
            raise ConfigError("ckpt=[]: name at least one checkpoint")
        device = pick_device(str(device), "device")
        weights = check_dtype(dtype, quantize, device)
        loaded = [cls._load_one(p, device, quantize, weights) for p in paths]
        first = loaded[0]
        if len(loaded) == 1:
            return first
        for other, other_path in zip(loaded[1:], paths[1:], strict=True):
            for lang, mine, theirs in (
                (first.src_lang, first.source_sp, other.source_sp),
                (first.tgt_lang, first.target_sp, other.target_sp),
            ):
                if mine.serialized_model_proto() != theirs.serialized_model_proto():
                    raise CheckpointError(
                        f"{other_path}: its {lang} SentencePiece model differs from that of "
                        f"{paths[0]}; the models of an ensemble share their vocabularies"
                    )
        model = Ensemble([t.model for t in loaded])  # type: ignore[misc]
        folder = first.dataset_folder
        return cls(model, first.source_sp, first.target_sp, first.config, device, folder)

    @classmethod
    def _load_one(
        cls, path: Path, device: torch.device, kind: str | None, dtype: torch.dtype
    ) -> Translator:
        saved = load_checkpoint(path, device, mmap=True)  # the weights; the optimizer's stay
        config = saved["config"]
        source_sp = load_tokenizer(saved, config["data"]["src_lang"], path)
        target_sp = load_tokenizer(saved, config["data"]["tgt_lang"], path)
        model = build_model(config, source_sp.get_piece_size(), target_sp.get_piece_size())
        model.load_state_dict(saved["model"])  # exported fp16/bf16 weights become fp32 here
        model = quantize_model(model.eval(), kind, device)
        if dtype != torch.float32:
            model = model.to(dtype)
        where = saved["tokenizers"][config["data"]["src_lang"]].get("path")
        folder = Path(where).parent if where else None
        return cls(model, source_sp, target_sp, config, device, folder)

    def sizes(self) -> dict[str, Any]:
        """The model's languages, vocabulary sizes and parameter count."""
        return {
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
            "src_vocab": self.source_sp.get_piece_size(),
            "tgt_vocab": self.target_sp.get_piece_size(),
            "parameters": sum(p.numel() for p in self.model.parameters()),
        }

    @overload
    def translate(
        self,
        texts: Sequence[str],
        search: SearchConfig | None = None,
        *,
        attention: bool = False,
        first_line: int = 1,
        split_sentences: Literal[False] = False,
        **settings: Any,
    ) -> list[Translation]: ...

    @overload
    def translate(
        self,
        texts: Sequence[str],
        search: SearchConfig | None = None,
        *,
        attention: bool = False,
        first_line: int = 1,
        split_sentences: Literal[True],
        **settings: Any,
    ) -> list[Paragraph]: ...

    def translate(
        self,
        texts: Sequence[str],
        search: SearchConfig | None = None,
        *,
        attention: bool = False,
        first_line: int = 1,
        split_sentences: bool = False,
        **settings: Any,
    ) -> list[Translation] | list[Paragraph]:
        """Translate raw sentences (normalised as in training), one `Translation` each, in
        order; an empty sentence gives no hypotheses. `search` says how (default:
        `SearchConfig()`), `settings` change some of it (beam_size=3, n_best=2, ...).
        `attention` keeps each hypothesis's weights; `first_line` is the number of texts[0] in
        its input, for the warnings.

        `split_sentences`: each text is a paragraph, split into sentences
        (`attnmt.data.sentences`); the sentences of all texts are translated together, and
        each text gets a `Paragraph` (one of punctuation alone: no sentence, an empty text)."""
        search = (search or SearchConfig()).changed(**settings)
        if not split_sentences:
            places = [f"line {first_line + i}" for i in range(len(texts))]
            return self._translate(texts, search, attention, places)
        split = split_paragraphs(texts, self.src_lang)
        places = [
            f"line {first_line + i}, sentence {k + 1}"
            for i, sentences in enumerate(split)
            for k in range(len(sentences))
        ]
        sentences = [sentence for paragraph in split for sentence in paragraph]
        found = self._translate(sentences, search, attention, places)
        return join_paragraphs(split, found, self.tgt_lang)

    def _translate(
        self, texts: Sequence[str], search: SearchConfig, attention: bool, places: Sequence[str]
    ) -> list[Translation]:
        """`translate` of sentences; `places` names each in the warnings."""
        pieces = self._encode(texts)
        limit = search.max_input_length
        for i, ids in enumerate(pieces):
            if len(ids) > limit:
                log.warning(
                    "%s: %d pieces, truncated to %d (max_input_length)", places[i], len(ids), limit
                )
        filled = [i for i, ids in enumerate(pieces) if ids]
        sources = [np.array(pieces[i][:limit], dtype=np.int64) for i in filled]
        found = translate_ids(self.model, sources, search, self.device, attention)
        results = [Translation([], [], len(ids) > limit) for ids in pieces]
        for i, source, hypotheses in zip(filled, sources, found, strict=True):
            results[i] = self.describe(source, hypotheses, len(pieces[i]) > limit)
        return results

    def score(
        self, sources: Sequence[str], targets: Sequence[str], batch_tokens: int = 4096
    ) -> list[PairScore]:
        """Forced decoding: each target's log-probability given its source (both normalised
        as in training), per piece and in total; see `attnmt.infer.score`."""
        if len(sources) != len(targets):
            raise ConfigError(f"{len(sources)} sources but {len(targets)} targets")
        src, tgt = self._encode(sources), self._encode(targets, target=True)
        found = forced_log_probs(
            self.model,
            [np.array(ids, dtype=np.int64) for ids in src],
            [np.array(ids, dtype=np.int64) for ids in tgt],
            batch_tokens,
            self.device,
        )
        return [
            PairScore([*map(self.target_sp.id_to_piece, ids), EOS_PIECE], lp.tolist())
            for ids, lp in zip(tgt, found, strict=True)
        ]

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        threshold: float | None = None,
        batch_tokens: int = 4096,
    ) -> list[list[Link]]:
        """Word alignments of given pairs from the model's attention under forced decoding:
        per pair, (source unit, target unit) links (`attnmt.infer.align`; an ensemble uses
        the mean attention). Both sides are normalised as in training."""
        if len(sources) != len(targets):
            raise ConfigError(f"{len(sources)} sources but {len(targets)} targets")
        src = [self._side(t) for t in sources]
        tgt = [self._side(t, target=True) for t in targets]
        found = forced_decode(
            self.model,
            [np.array(ids, dtype=np.int64) for ids, _ in src],
            [np.array(ids, dtype=np.int64) for ids, _ in tgt],
            batch_tokens,
            self.device,
            keep_attention=True,
        )
        return [
            links_from_attention(weights, source, target, threshold)
            for (_, source), (_, target), (_, weights) in zip(src, tgt, found, strict=True)
        ]

    def links(
        self, text: str, translation: Translation, threshold: float | None = None
    ) -> list[list[Link]]:
        """The hard links of each hypothesis of `translation` (translated with `attention`)
        of source `text`, from its attention."""
        return [
            links_from_attention(hypothesis.attention, source, target, threshold)
            for hypothesis, source, target in self._sides(text, translation)
        ]

    def piece_links(
        self, text: str, translation: Translation, threshold: float | None = None
    ) -> list[list[Link]]:
        """The hard links of each hypothesis of `translation`, as `links` finds them, between
        pieces: (source piece, target piece) pairs, indices into `source_pieces` and
        `target_pieces`, the cells of the attention matrix that a link covers."""
        return [
            piece_links(
                links_from_attention(hypothesis.attention, source, target, threshold),
                source,
                target,
            )
            for hypothesis, source, target in self._sides(text, translation)
        ]

    def _sides(self, text: str, translation: Translation) -> Iterator[tuple[Candidate, Side, Side]]:
        """Each hypothesis of `translation` of source `text` with the two sides alignment
        sees: the source as the model read it, the hypothesis as decoded (without EOS)."""
        source = self._side(text)[1]
        source.piece_units = source.piece_units[: len(translation.source_pieces) - 1]  # cut
        for hypothesis in translation.hypotheses:
            ids = [self.target_sp.piece_to_id(p) for p in hypothesis.target_pieces]
            ids = ids[:-1] if hypothesis.target_pieces[-1:] == [EOS_PIECE] else ids
            yield hypothesis, source, Side.decoded(self.target_sp, ids, self.tgt_lang)

    def _encode(self, texts: Sequence[str], target: bool = False) -> list[list[int]]:
        """Raw sentences of the source (or target) language -> their piece ids, normalised
        as in training."""
        sp, lang = self._language(target)
        return [sp.encode(normalize(t, lang), out_type=int) for t in texts]

    def _side(self, text: str, target: bool = False) -> tuple[list[int], Side]:
        """A raw sentence of the source (or target) language, normalised as in training: its
        piece ids and its side for alignment."""
        sp, lang = self._language(target)
        return Side.encoded(sp, normalize(text, lang), lang)

    def _language(self, target: bool) -> tuple[SentencePieceProcessor, str]:
        """The SentencePiece model and language of the source, or of the target."""
        return (self.target_sp, self.tgt_lang) if target else (self.source_sp, self.src_lang)

    def describe(
        self, source: np.ndarray, hypotheses: list[Hypothesis], truncated: bool = False
    ) -> Translation:
        """The `Translation` of source ids (without EOS) and their hypotheses: pieces, texts."""
        source_pieces = [self.source_sp.id_to_piece(int(t)) for t in source] + [EOS_PIECE]
        return Translation(source_pieces, [self._candidate(h) for h in hypotheses], truncated)

    def _candidate(self, hypothesis: Hypothesis) -> Candidate:
        pieces = [self.target_sp.id_to_piece(i) for i in hypothesis.ids]
        weights = hypothesis.attention
        return Candidate(
            decode(self.target_sp, hypothesis.ids),
            hypothesis.score,
            pieces + [EOS_PIECE] if hypothesis.ended else pieces,
            weights.float().numpy() if weights is not None else None,
        )
