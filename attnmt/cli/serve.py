"""attnmt-serve ckpt=PATH: serve a trained model over HTTP (see attnmt/serve/app.py)."""

import logging
import signal
from dataclasses import dataclass

from attnmt.cli.common import run_tool
from attnmt.config import in_range
from attnmt.errors import ConfigError
from attnmt.runtime import keep_freed_memory, pick_device, set_threads
from attnmt.serve.app import Limits, create_app
from attnmt.translate import SearchConfig, Translator

log = logging.getLogger("attnmt")


@dataclass(frozen=True)
class ServeOptions:
    """attnmt-serve's keys; configs/tools/serve.yaml documents them."""

    ckpt: str
    host: str
    port: int
    max_wait_ms: float
    max_batch_sentences: int
    max_sentences: int
    max_chars: int
    max_beam_size: int
    alpha: float
    max_length_a: float
    max_length_b: int
    max_input_length: int
    batch_tokens: int
    device: str
    threads: int | None

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port}: must be 0 to 65535")
        if not 0 <= self.max_wait_ms <= 10_000:
            raise ConfigError(f"max_wait_ms={self.max_wait_ms}: must be 0 to 10000")
        for key in ("max_batch_sentences", "max_sentences", "max_chars", "max_beam_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key}={getattr(self, key)}: must be at least 1")
        if not self.host:
            raise ConfigError("host='': name an address, e.g. 127.0.0.1")
        in_range("threads", self.threads, 1, 1024)
        pick_device(self.device, "device")
        self.search()

    def search(self) -> SearchConfig:
        """The search settings every request shares (beam size and n-best are its own)."""
        return SearchConfig(
            1,
            1,
            self.alpha,
            self.max_length_a,
            self.max_length_b,
            self.max_input_length,
            self.batch_tokens,
        )


def main() -> None:
    run_tool("serve", ServeOptions, run)


def run(cfg: ServeOptions) -> None:
    """Load the model, then serve until SIGINT or SIGTERM (requests in flight are answered)."""
    import uvicorn

    set_threads(cfg.threads)
    keep_freed_memory()
    translator = Translator.load(cfg.ckpt, cfg.device)
    limits = Limits(cfg.max_sentences, cfg.max_chars, cfg.max_beam_size)
    app = create_app(translator, cfg.search(), limits, cfg.max_wait_ms, cfg.max_batch_sentences)
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
