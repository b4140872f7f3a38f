"""attnmt-serve ckpt=PATH, or models={NAME: PATH, ...}: serve trained models over HTTP (see
attnmt/serve/app.py)."""

import ipaddress
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import in_range
from attnmt.errors import ConfigError
from attnmt.infer.translate import MAX_BEAM_SIZE, Translator
from attnmt.runtime import keep_freed_memory, set_threads
from attnmt.serve.app import Limits, ServiceConfig, body_bytes, create_app

log = logging.getLogger("attnmt")

TOKEN_VARIABLE = "ATTNMT_SERVE_TOKEN"
MIN_TOKEN_LENGTH = 16
# The name of the one model of ckpt=PATH (a request may name it, or name none).
DEFAULT_MODEL = "default"
# A model's name travels in JSON and in the page: a word, no spaces or markup.
MODEL_NAME = re.compile(r"[\w.-]{1,64}")

Checkpoints = str | list[str]  # one model file, or the files of an ensemble


def named_models(
    ckpt: Checkpoints | None, models: dict[str, Checkpoints] | None
) -> dict[str, Checkpoints]:
    """The models to serve, by name, the default first: ckpt=PATH as one model named
    "default", or the models={NAME: PATH or [PATHS], ...} mapping; a ConfigError names the
    key at fault."""
    if ckpt is not None and models is not None:
        raise ConfigError(
            "ckpt and models: give one of them (ckpt=PATH serves one model, "
            "models={NAME: PATH, ...} several)"
        )
    if models is None:
        if ckpt is None:
            raise ConfigError("attnmt-serve needs ckpt=PATH or models={NAME: PATH, ...}")
        return {DEFAULT_MODEL: ckpt}
    if not models:
        raise ConfigError("models={}: name at least one model, e.g. models={a: A.pt, b: B.pt}")
    for name, paths in models.items():
        if not (isinstance(name, str) and MODEL_NAME.fullmatch(name)):
            raise ConfigError(
                f"models: {name!r} is not a model name; use 1 to 64 letters, digits, _ . -"
            )
        files = paths if isinstance(paths, list) else [paths]
        if not files or not all(isinstance(f, str) and f for f in files):
            raise ConfigError(
                f"models.{name}={paths!r}: expected a checkpoint file or a list of them (an "
                "ensemble)"
            )
    return dict(models)


def is_loopback(host: str) -> bool:
    """Whether `host` serves this machine only (a name other than localhost counts as not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class ServeOptions(ModelToolOptions):
    """attnmt-serve's keys; configs/tools/serve.yaml documents them. `beam_size` is what a
    request gets that names none; `ckpt` (one model) or `models` (several, by name) says
    what to serve."""

    ckpt: Checkpoints | None = None
    models: dict[str, Checkpoints] | None = None
    host: str
    port: int
    max_wait_ms: float
    max_batch_sentences: int
    max_sentences: int
    max_chars: int
    max_beam_size: int
    max_body_bytes: int | None
    max_queue: int
    read_timeout_s: float
    token_file: str | None
    public: bool

    def __post_init__(self) -> None:
        super().__post_init__()
        named_models(self.ckpt, self.models)
        if not self.host:
            raise ConfigError("host='': name an address, e.g. 127.0.0.1")
        in_range("port", self.port, 0, 65535)
        in_range("max_wait_ms", self.max_wait_ms, 0, 10_000)
        for key in ("max_batch_sentences", "max_sentences", "max_chars"):
            in_range(key, getattr(self, key), 1, None)
        in_range("max_beam_size", self.max_beam_size, 1, MAX_BEAM_SIZE)
        in_range("beam_size", self.search.beam_size, 1, self.max_beam_size)
        in_range("max_body_bytes", self.max_body_bytes, 1, None)
        if self.max_queue < self.max_sentences:  # a full request would never fit
            raise ConfigError(
                f"max_queue={self.max_queue}: must be at least max_sentences ({self.max_sentences})"
            )
        in_range("read_timeout_s", self.read_timeout_s, 0.1, 3600)
        if not (self.token() or self.public or is_loopback(self.host)):
            raise ConfigError(
                f"host={self.host} serves beyond this machine: set {TOKEN_VARIABLE} or "
                "token_file=PATH to require a token, or public=true to serve anyone"
            )

    def token(self) -> str | None:
        """The token every /v1 request must carry: token_file's first line, else the
        environment's ATTNMT_SERVE_TOKEN; None where neither is set."""
        if self.token_file is not None:
            key, path = "token_file", Path(self.token_file)
            try:
                token = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as error:
                raise ConfigError(f"token_file={path}: cannot read it ({error})") from None
        else:
            key, token = TOKEN_VARIABLE, os.environ.get(TOKEN_VARIABLE)
            if token is None:
                return None
        if len(token) < MIN_TOKEN_LENGTH or not token.isascii() or not token.isprintable():
            raise ConfigError(
                f"{key}: the token must be at least {MIN_TOKEN_LENGTH} printable ASCII characters "
                "on one line (python -c 'import secrets; print(secrets.token_urlsafe())')"
            )
        return token

    def load_models(self) -> dict[str, Translator]:
        """The models to serve, by name, the default first; each on the options' device, in
        their precision."""
        models = {
            name: Translator.load(paths, self.device, self.quantize, self.dtype)
            for name, paths in named_models(self.ckpt, self.models).items()
        }
        first, *others = models.items()  # the page sends one sentence to all of them
        for name, translator in others:
            if (translator.src_lang, translator.tgt_lang) != (first[1].src_lang, first[1].tgt_lang):
                raise ConfigError(
                    f"models.{name} translates {translator.src_lang}->{translator.tgt_lang}, but "
                    f"models.{first[0]} {first[1].src_lang}->{first[1].tgt_lang}: served models "
                    "share one direction"
                )
        return models


def main() -> None:
    run_tool("serve", ServeOptions, run)


def run(cfg: ServeOptions) -> None:
    """Load the models, then serve until SIGINT or SIGTERM (requests in flight are
    answered)."""
    import uvicorn

    from attnmt.serve.protocol import with_header_timeout

    set_threads(cfg.threads)
    keep_freed_memory()
    models = cfg.load_models()
    max_body_bytes = cfg.max_body_bytes or body_bytes(cfg.max_sentences, cfg.max_chars)
    limits = Limits(cfg.max_sentences, cfg.max_chars, cfg.max_beam_size, max_body_bytes)
    token = cfg.token()
    service = ServiceConfig(
        cfg.max_wait_ms, cfg.max_batch_sentences, cfg.max_queue, cfg.read_timeout_s, token
    )
    app = create_app(models, cfg.search, limits, service)
    files = named_models(cfg.ckpt, cfg.models)
    log.info(
        "serving %s on http://%s:%d/%s",
        ", ".join(
            f"{name}={files[name]} ({t.src_lang} -> {t.tgt_lang})" for name, t in models.items()
        ),
        cfg.host,
        cfg.port,
        " (requests need the token)" if token else "",
    )
    config = uvicorn.Config(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level="info",
        http=with_header_timeout(cfg.read_timeout_s),
    )
    server = uvicorn.Server(config)
    # uvicorn answers the requests in flight on SIGINT/SIGTERM, then raises the signal again
    # for the handler it found: this one, so the service ends with status 0.
    stops: list[str] = []
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda n, _frame: stops.append(signal.Signals(n).name))
    try:
        server.run()
    except SystemExit as stop:  # uvicorn exits 1 when it cannot bind
        raise ConfigError(f"port={cfg.port}: cannot serve on {cfg.host}:{cfg.port}") from stop
    if not server.started:
        raise ConfigError(f"host={cfg.host} port={cfg.port}: the service could not start")
    log.info("stopped by %s", stops[0] if stops else "the server")


if __name__ == "__main__":
    main()
