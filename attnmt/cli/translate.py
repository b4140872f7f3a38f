"""attnmt-translate ckpt=PATH: translate stdin or input=FILE, one line out per line in (with
split_sentences=true, each line a paragraph translated sentence by sentence)."""

import contextlib
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import in_range, output_path
from attnmt.data.corpus import decode_lines, read_lines
from attnmt.errors import ConfigError
from attnmt.infer.translate import SearchConfig
from attnmt.infer.writers import plot_attention, save_attention, translate_stream
from attnmt.runtime import keep_freed_memory, set_threads


@dataclass(frozen=True, kw_only=True)
class TranslateOptions(ModelToolOptions):
    """attnmt-translate's keys; configs/tools/translate.yaml documents them."""

    search_keys: ClassVar[tuple[str, ...]] = tuple(f.name for f in fields(SearchConfig))

    input: str | None
    output: str | None
    attention: str | None
    plot: str | None
    alignment: str | None
    threshold: float | None
    split_sentences: bool

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.alignment not in (None, "hard"):
            raise ConfigError(f"alignment={self.alignment!r}: null or hard")
        in_range("threshold", self.threshold, 0.0, 1.0)


def main() -> None:
    run_tool("translate", TranslateOptions, run)


def run(cfg: TranslateOptions) -> None:
    """Translate what `cfg` names, as the module docstring says."""
    set_threads(cfg.threads)
    keep_freed_memory()
    search = cfg.search
    output = output_path(cfg.output, "output") if cfg.output else None
    if output and cfg.input and output.resolve() == Path(cfg.input).resolve():
        raise ConfigError(f"output={cfg.output} is the input: writing it would erase it")
    attention = output_path(cfg.attention, "attention") if cfg.attention else None
    plot = output_path(cfg.plot, "plot", folder=True) if cfg.plot else None
    translator = cfg.load()
    align, split = cfg.alignment == "hard", cfg.split_sentences

    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(output, "w", encoding="utf-8")) if output else sys.stdout
        if cfg.input is None and sys.stdin.isatty():  # interactive: a line in, a line out
            print("attnmt: type a sentence, Ctrl-D to quit", file=sys.stderr)
            for number, line in enumerate(sys.stdin):
                text = line.rstrip("\n")
                translate_stream(
                    translator, [text], search, out, False, align, cfg.threshold, split, number
                )
                out.flush()
            return
        source = (
            read_lines(Path(cfg.input)) if cfg.input else decode_lines(sys.stdin.buffer, "<stdin>")
        )
        keep = bool(attention or plot)
        results = translate_stream(
            translator, source, search, out, keep, align, cfg.threshold, split
        )
    if attention:
        save_attention(results, attention)
    if plot:
        plot_attention(results, plot)


if __name__ == "__main__":
    main()
