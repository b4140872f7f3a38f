"""attnmt-serve ckpt=PATH, or models={NAME: PATH, ...}: serve trained models over HTTP (see
attnmt/serve/app.py)."""

import logging
import signal
from dataclasses import dataclass

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import in_range
from attnmt.errors import ConfigError
from attnmt.infer.translate import MAX_BEAM_SIZE, Translator
from attnmt.runtime import keep_freed_memory, set_threads
from attnmt.serve.app import Limits, ServiceConfig, body_bytes, create_app
from attnmt.serve.guard import TOKEN_VARIABLE, is_loopback, read_token
from attnmt.serve.models import Checkpoints, load_models, named_models

log = logging.getLogger("attnmt")


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
        """The token every /v1 request must carry (token_file, else ATTNMT_SERVE_TOKEN), or
        None."""
        return read_token(self.token_file)

    def load_models(self) -> dict[str, Translator]:
        """The models to serve, by name, the default first; each on the options' device, in
        their precision."""
        files = named_models(self.ckpt, self.models)
        return load_models(files, self.device, self.quantize, self.dtype)


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
