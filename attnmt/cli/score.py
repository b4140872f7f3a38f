"""attnmt-score ckpt=PATH source=FILE target=FILE: each pair's log-probability under the model
(forced decoding), one line per pair: total, per-piece mean, piece count, each piece's."""

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import run_tool
from attnmt.config import in_range, output_path
from attnmt.data.corpus import chunks, read_lines
from attnmt.errors import DataError
from attnmt.infer.translate import Translator
from attnmt.infer.writers import BLOCK_LINES, write_scores
from attnmt.runtime import keep_freed_memory, pick_device, set_threads


@dataclass(frozen=True)
class ScoreOptions:
    """attnmt-score's keys; configs/tools/score.yaml documents them."""

    ckpt: str
    source: str
    target: str
    output: str | None
    device: str
    threads: int | None
    batch_tokens: int

    def __post_init__(self) -> None:
        in_range("threads", self.threads, 1, 1024)
        in_range("batch_tokens", self.batch_tokens, 1, None)
        pick_device(self.device, "device")


def main() -> None:
    run_tool("score", ScoreOptions, run)


def run(cfg: ScoreOptions) -> None:
    """Score the pairs `cfg` names, a block of lines at a time."""
    set_threads(cfg.threads)
    keep_freed_memory()
    source, target = Path(cfg.source), Path(cfg.target)
    counts = [sum(1 for _ in read_lines(path)) for path in (source, target)]
    if counts[0] != counts[1]:
        raise DataError(f"{source} has {counts[0]:,} lines but {target} has {counts[1]:,}")
    output = output_path(cfg.output, "output") if cfg.output else None
    if output and output.resolve() in (source.resolve(), target.resolve()):
        raise DataError(f"output={cfg.output} is an input: writing it would erase it")
    translator = Translator.load(cfg.ckpt, cfg.device)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(output, "w", encoding="utf-8")) if output else sys.stdout
        pairs = zip(read_lines(source), read_lines(target), strict=True)
        for block in chunks(pairs, BLOCK_LINES):
            sources, targets = zip(*block, strict=True)
            write_scores(translator.score(sources, targets, cfg.batch_tokens), out)


if __name__ == "__main__":
    main()
