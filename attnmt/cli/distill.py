"""attnmt-distill ckpt=PATH output=DIR: the training corpus of a distilled student
(`attnmt.infer.distill`): the teacher (a model, or [A.pt,B.pt]: an ensemble) translates its
training split with beam search into DIR, a split folder for `attnmt-train data=splits`."""

from dataclasses import dataclass

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import output_path
from attnmt.infer.distill import distill_corpus
from attnmt.runtime import keep_freed_memory, set_threads


@dataclass(frozen=True, kw_only=True)
class DistillOptions(ModelToolOptions):
    """attnmt-distill's keys; configs/tools/distill.yaml documents them."""

    output: str


def main() -> None:
    run_tool("distill", DistillOptions, run)


def run(cfg: DistillOptions) -> None:
    """Write the student's split folder, as the module docstring says."""
    set_threads(cfg.threads)
    keep_freed_memory()
    out = output_path(cfg.output, "output", folder=True)
    direction = distill_corpus(cfg.load(), cfg.search, out)
    print(f"{out}: the student's corpus; train it with")
    print(f"  attnmt-train data=splits data.split_dir={out} {direction}")


if __name__ == "__main__":
    main()
