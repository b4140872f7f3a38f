"""attnmt-align ckpt=PATH source=FILE target=FILE: word alignments from attention, one line of
i-j links per pair; or gold=DIR: the AER of those alignments on a gold set."""

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import ModelOptions, run_tool
from attnmt.config import in_range, output_path
from attnmt.errors import ConfigError
from attnmt.infer.align import format_links, read_pairs
from attnmt.infer.evaluate import GoldSet, alignment_error
from attnmt.runtime import (
    keep_freed_memory,
    set_threads,
)


@dataclass(frozen=True, kw_only=True)
class AlignOptions(ModelOptions):
    """attnmt-align's keys; configs/tools/align.yaml documents them."""

    source: str | None
    target: str | None
    output: str | None
    gold: str | None
    threshold: float | None
    batch_tokens: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.source) != bool(self.target):
            raise ConfigError("source=FILE and target=FILE go together")
        if bool(self.source) == bool(self.gold):
            raise ConfigError("attnmt-align needs source=FILE target=FILE, or gold=DIR")
        in_range("threshold", self.threshold, 0.0, 1.0)
        in_range("batch_tokens", self.batch_tokens, 1, None)


def main() -> None:
    run_tool("align", AlignOptions, run)


def run(cfg: AlignOptions) -> None:
    """Align what `cfg` names, as the module docstring says."""
    set_threads(cfg.threads)
    keep_freed_memory()
    if cfg.gold:
        gold = GoldSet.read(Path(cfg.gold))
        translator = cfg.load()
        found = alignment_error(translator, gold, cfg.threshold, cfg.batch_tokens)
        print(
            f"{gold.name}: AER {found.aer:.3f} (95% interval {found.low:.3f}-{found.high:.3f}), "
            f"precision {found.precision:.3f}, recall {found.recall:.3f}, {len(gold.pairs)} pairs"
        )
        return
    sources, targets = read_pairs(Path(cfg.source), Path(cfg.target))
    output = output_path(cfg.output, "output") if cfg.output else None
    if output and output.resolve() in (Path(cfg.source).resolve(), Path(cfg.target).resolve()):
        raise ConfigError(f"output={cfg.output} is an input: writing it would erase it")
    translator = cfg.load()
    links = translator.align(sources, targets, cfg.threshold, cfg.batch_tokens)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(output, "w", encoding="utf-8")) if output else sys.stdout
        out.writelines(format_links(pair) + "\n" for pair in links)


if __name__ == "__main__":
    main()
