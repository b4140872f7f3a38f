"""The HTTP API and the web page of attnmt-serve.

    POST /v1/translate  {"text": [...], "model": null, "beam_size": null, "n_best": 1,
                         "attention": false, "split_sentences": false}
                        (model null or left out: the first model; beam_size null or left
                        out: the service's default, see /v1/health; split_sentences: each
                        text a paragraph, its sentences translated and joined)
    GET  /v1/health     the models' names, languages and sizes, and the service's limits
    GET  /              the web page (static/): a paragraph a line, each model's
                        translations, n-best lists and attention heatmaps with the hard
                        alignment, side by side
    GET  /docs          the OpenAPI docs

The service serves the named models it was started with (one, or several to compare); a
request picks one by name, and no request can name a file. Each model has its own batcher:
its own queue (`max_queue` sentences each) and its own decoding thread. Every error is JSON,
{"error": "..."}, naming the field at fault. Before the app, `guard.py` checks the token and
bounds the body; each batcher sheds load past `max_queue` (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import unicodedata
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from attnmt.errors import ConfigError
from attnmt.infer.translate import (
    Paragraph,
    SearchConfig,
    Translation,
    Translator,
    join_paragraphs,
    split_paragraphs,
)
from attnmt.pieces import group_links, group_weights, labels
from attnmt.serve.batcher import Batcher, Overloaded
from attnmt.serve.guard import BodyLimit, RequireToken

STATIC = {"app.js": "text/javascript", "style.css": "text/css", "index.html": "text/html"}
# The most JSON can spend on one character: two \uXXXX escapes (a character outside the BMP).
JSON_BYTES_PER_CHAR = 12
JSON_OVERHEAD_BYTES = 65_536  # keys, options, punctuation and whitespace around the sentences


def body_bytes(max_sentences: int, max_chars: int) -> int:
    """The largest body a request within the sentence and character limits can need."""
    return max_sentences * max_chars * JSON_BYTES_PER_CHAR + JSON_OVERHEAD_BYTES


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (configs/tools/serve.yaml gives the values)."""

    max_sentences: int  # sentences per request (with split_sentences, after splitting)
    max_chars: int  # characters per sentence (with split_sentences, after splitting)
    max_beam_size: int
    max_body_bytes: int  # the request body, counted as it arrives


class TranslateRequest(BaseModel):
    """The body of POST /v1/translate."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: list[str] = Field(description="the sentences to translate, one per item")
    model: str | None = Field(None, description="a model's name (see /v1/health); null: the first")
    beam_size: int | None = Field(None, description="1: greedy; null: the service's default")
    n_best: int = Field(1, description="hypotheses per sentence, best first (at most beam_size)")
    attention: bool = Field(
        False, description="add each hypothesis's attention weights and hard alignment"
    )
    split_sentences: bool = Field(
        False,
        description="each text is a paragraph: its sentences are translated (the limits "
        "count them) and joined; its answer lists them under `sentences`",
    )


class RequestError(Exception):
    """A request the service refuses: its status code and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def request_search(body: TranslateRequest, search: SearchConfig, limits: Limits) -> SearchConfig:
    """The search a request asks for: the service's, with the request's beam size (if it
    names one) and n-best; or a RequestError naming the field that the limits refuse."""
    check_request(body, limits)
    beam_size = search.beam_size if body.beam_size is None else body.beam_size
    if not 1 <= beam_size <= limits.max_beam_size:
        raise RequestError(422, f"beam_size: {beam_size}; must be 1 to {limits.max_beam_size}")
    try:
        return search.changed(beam_size=beam_size, n_best=body.n_best)
    except ConfigError as error:  # "key=value: why" as the service says it, "key: value; why"
        key, _, rest = str(error).partition("=")
        value, _, why = rest.partition(": ")
        raise RequestError(422, f"{key}: {value}; {why}") from None


def model_named(name: str | None, names: Sequence[str]) -> str:
    """The model a request names (the first where it names none), or a RequestError (404)
    that lists the models there are."""
    if name is None:
        return names[0]
    if name not in names:
        raise RequestError(404, f"model: no model {name!r}; the models: {', '.join(names)}")
    return name


def check_request(body: TranslateRequest, limits: Limits) -> None:
    """Refuse texts that the limits do not allow, naming the field (with split_sentences,
    `check_sentences` counts their sentences)."""
    if not body.text:
        raise RequestError(422, "text: an empty list; send at least one sentence")
    if len(body.text) > limits.max_sentences:
        raise RequestError(
            413, f"text: {len(body.text)} sentences; at most {limits.max_sentences} per request"
        )
    for i, sentence in enumerate(body.text):
        if len(sentence) > limits.max_chars and not body.split_sentences:
            raise RequestError(
                413, f"text[{i}]: {len(sentence)} characters; at most {limits.max_chars}"
            )
        if any(unicodedata.category(c) in ("Cc", "Cs") and c != "\t" for c in sentence):
            raise RequestError(
                422, f"text[{i}]: control characters or unpaired surrogates; one plain line each"
            )


def check_sentences(split: Sequence[Sequence[str]], limits: Limits) -> None:
    """Refuse paragraphs whose sentences (`split`, by paragraph) the limits do not allow."""
    count = sum(map(len, split))
    if count > limits.max_sentences:
        raise RequestError(
            413, f"text: {count} sentences once split; at most {limits.max_sentences} per request"
        )
    for i, sentences in enumerate(split):
        for k, sentence in enumerate(sentences):
            if len(sentence) > limits.max_chars:
                raise RequestError(
                    413,
                    f"text[{i}]: sentence {k + 1} has {len(sentence)} characters; at most "
                    f"{limits.max_chars}",
                )


def translation_json(
    text: str, result: Translation, alignments: list[list[tuple[int, int]]] | None
) -> dict:
    """One sentence's answer: the best text, the hypotheses and the pieces; given each
    hypothesis's hard alignment (the request asked for attention), its attention weights
    and that alignment, as [source piece, target piece] pairs. The byte pieces of a character
    (byte fallback) are one piece, the character (`attnmt.pieces`)."""
    hypotheses = []
    for k, hypothesis in enumerate(result.hypotheses):
        entry = {
            "text": hypothesis.text,
            "score": round(hypothesis.score, 4),
            "target_pieces": labels(hypothesis.target_pieces),
        }
        if alignments is not None:
            pieces = (result.source_pieces, hypothesis.target_pieces)
            weights = group_weights(hypothesis.attention, *pieces)[0]
            entry["attention"] = [[round(w, 4) for w in row] for row in weights.tolist()]
            entry["alignment"] = [list(link) for link in group_links(alignments[k], *pieces)]
        hypotheses.append(entry)
    return {
        "source": text,
        "text": result.text,
        "source_pieces": labels(result.source_pieces),
        "truncated": result.truncated,
        "hypotheses": hypotheses,
    }


def paragraph_json(text: str, paragraph: Paragraph, sentences: list[dict]) -> dict:
    """One paragraph's answer (split_sentences): its best translations joined, and each of
    its sentences' answers (`translation_json`); none for a paragraph of punctuation alone."""
    return {
        "source": text,
        "text": paragraph.text,
        "truncated": paragraph.truncated,
        "sentences": sentences,
    }


@dataclass(frozen=True)
class ServiceConfig:
    """How the service runs, beside what a request may ask for (configs/tools/serve.yaml
    gives the values)."""

    max_wait_ms: float  # how long a request waits for others to decode with it
    max_batch_sentences: int  # sentences decoded together
    max_queue: int  # sentences waiting for a batch; past that, 503
    read_timeout_s: float  # to send a request's body (its headers: see protocol.py)
    token: str | None  # every /v1 request must carry it, where set


def piece_alignments(
    translator: Translator, texts: Sequence[str], results: Sequence[Translation]
) -> list[list[list[tuple[int, int]]]]:
    """Per sentence, per hypothesis, the hard links between pieces (`Translator.piece_links`)."""
    return [
        translator.piece_links(text, result) for text, result in zip(texts, results, strict=True)
    ]


def create_app(
    models: Mapping[str, Translator],
    search: SearchConfig,
    limits: Limits,
    service: ServiceConfig,
) -> FastAPI:
    """The service of the named translators, the first the default; each its own batcher."""
    if not models:
        raise ConfigError("models: name at least one model")
    batchers = {
        name: Batcher(
            translator, service.max_wait_ms, service.max_batch_sentences, service.max_queue
        )
        for name, translator in models.items()
    }
    names = list(batchers)
    first = models[names[0]]

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(batcher.run()) for batcher in batchers.values()]
        yield  # uvicorn returns here once the requests in flight are answered
        for task in tasks:
            task.cancel()
        for batcher in batchers.values():
            batcher.worker.shutdown(wait=True)

    app = FastAPI(
        title="attnmt",
        description=f"{first.src_lang} -> {first.tgt_lang} translation: {', '.join(names)}",
        lifespan=lifespan,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        if any(p["type"] == "json_invalid" for p in problems):
            return JSONResponse({"error": "malformed JSON in the request body"}, status_code=400)
        described = "; ".join(
            f"{'.'.join(str(part) for part in p['loc'][1:]) or 'body'}: {p['msg']}"
            for p in problems
        )
        return JSONResponse({"error": described}, status_code=422)

    @app.exception_handler(RequestError)
    async def refused(_request: Request, error: RequestError) -> JSONResponse:
        return JSONResponse({"error": error.message}, status_code=error.status)

    @app.exception_handler(Overloaded)
    async def overloaded(_request: Request, error: Overloaded) -> JSONResponse:
        return JSONResponse({"error": str(error)}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)}, status_code=error.status_code)

    @app.post("/v1/translate")
    async def translate(body: TranslateRequest) -> dict:
        """Translate the sentences of `text` (or its paragraphs' sentences), in order, with
        the model `model` names."""
        name = model_named(body.model, names)
        asked = request_search(body, search, limits)
        batcher = batchers[name]
        texts = sentences = list(body.text)
        if body.split_sentences:
            split = split_paragraphs(texts, batcher.translator.src_lang)
            check_sentences(split, limits)
            sentences = [sentence for paragraph in split for sentence in paragraph]
        results = await batcher.translate(sentences, asked, body.attention) if sentences else []
        alignments: list = [None] * len(sentences)
        if body.attention:  # off the event loop: it decodes each hypothesis's pieces again
            alignments = await asyncio.to_thread(
                piece_alignments, batcher.translator, sentences, results
            )
        answers = [
            translation_json(sentence, result, links)
            for sentence, result, links in zip(sentences, results, alignments, strict=True)
        ]
        if not body.split_sentences:
            return {"model": name, "translations": answers}
        paragraphs, at = [], 0
        tgt_lang = batcher.translator.tgt_lang
        for text, paragraph in zip(texts, join_paragraphs(split, results, tgt_lang), strict=True):
            count = len(paragraph.sentences)
            paragraphs.append(paragraph_json(text, paragraph, answers[at : at + count]))
            at += count
        return {"model": name, "translations": paragraphs}

    @app.get("/v1/health")
    async def health() -> dict:
        """The models (the first the default: its languages and sizes also at the top level,
        as with one model) and what a request may ask for."""
        limits_json = {**vars(limits), "default_beam_size": search.beam_size}
        models_json = [{"name": name, **models[name].sizes()} for name in names]
        return {
            "status": "ok",
            **first.sizes(),
            "default_model": names[0],
            "models": models_json,
            "limits": limits_json,
        }

    files = resources.files("attnmt.serve") / "static"
    assets = {name: (files / name).read_bytes() for name in STATIC}

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return Response(assets["index.html"], media_type="text/html; charset=utf-8")

    @app.get("/static/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in assets:
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        return Response(assets[name], media_type=f"{STATIC[name]}; charset=utf-8")

    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes, timeout_s=service.read_timeout_s)
    if service.token is not None:  # (added last: runs first, before any body is read)
        app.add_middleware(RequireToken, token=service.token)
    return app
