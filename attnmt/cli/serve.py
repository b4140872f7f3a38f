"""attnmt-serve ckpt=PATH: serve a trained model over HTTP (see attnmt/serve/app.py)."""

import logging
import signal
from dataclasses import dataclass

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import in_range
from attnmt.errors import ConfigError
from attnmt.infer.translate import MAX_BEAM_SIZE, Translator
from attnmt.runtime import keep_freed_memory, set_threads
from attnmt.serve.app import Limits, create_app

log = logging.getLogger("attnmt")


@dataclass(frozen=True, kw_only=True)
class ServeOptions(ModelToolOptions):
    """attnmt-serve's keys; configs/tools/serve.yaml documents them. `beam_size` is what a
    request gets that names none."""

    host: str
    port: int
    max_wait_ms: float
    max_batch_sentences: int
    max_sentences: int
    max_chars: int
    max_beam_size: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.host:
            raise ConfigError("host='': name an address, e.g. 127.0.0.1")
        in_range("port", self.port, 0, 65535)
        in_range("max_wait_ms", self.max_wait_ms, 0, 10_000)
        for key in ("max_batch_sentences", "max_sentences", "max_chars"):
            in_range(key, getattr(self, key), 1, None)
        in_range("max_beam_size", self.max_beam_size, 1, MAX_BEAM_SIZE)
        in_range("beam_size", self.search.beam_size, 1, self.max_beam_size)


def main() -> None:
    run_tool("serve", ServeOptions, run)


def run(cfg: ServeOptions) -> None:
    """Load the model, then serve until SIGINT or SIGTERM (requests in flight are answered)."""
    import uvicorn

    set_threads(cfg.threads)
    keep_freed_memory()
    translator = Translator.load(cfg.ckpt, cfg.device, cfg.quantize)
    limits = Limits(cfg.max_sentences, cfg.max_chars, cfg.max_beam_size)
    app = create_app(translator, cfg.search, limits, cfg.max_wait_ms, cfg.max_batch_sentences)
    log.info(
        "serving %s (%s -> %s) on http://%s:%d/",
        cfg.ckpt,
        translator.src_lang,
        translator.tgt_lang,
        cfg.host,
        cfg.port,
    )
    server = uvicorn.Server(uvicorn.Config(app, host=cfg.host, port=cfg.port, log_level="info"))
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
