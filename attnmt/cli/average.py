"""attnmt-average ckpt=[A.pt,B.pt,...] output=MODEL.pt, or run=DIR output=MODEL.pt: write the
mean of one model's checkpoints (or the best ones a run kept) as a self-contained file."""

from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import run_tool
from attnmt.config import output_path
from attnmt.errors import ConfigError
from attnmt.infer.average import average_checkpoints
from attnmt.infer.checkpoint import RunDir


@dataclass(frozen=True)
class AverageOptions:
    """attnmt-average's keys; configs/tools/average.yaml documents them."""

    ckpt: list[str] | None
    run: str | None
    output: str

    def __post_init__(self) -> None:
        if (self.ckpt is None) == (self.run is None):
            raise ConfigError("attnmt-average needs ckpt=[A.pt,B.pt,...] or run=DIR, not both")

    def inputs(self) -> list[Path]:
        """The checkpoints to average."""
        if self.ckpt is not None:
            return [Path(p) for p in self.ckpt]
        run = Path(self.run or "")
        if not run.is_dir():
            raise ConfigError(f"run={self.run}: not a folder")
        kept = RunDir(run).kept_files()
        if not kept:
            raise ConfigError(
                f"run={self.run}: no best.step*.pt files; train with trainer.keep_best=K "
                "to keep the K best checkpoints"
            )
        return kept


def main() -> None:
    run_tool("average", AverageOptions, run)


def run(cfg: AverageOptions) -> None:
    """Average what `cfg` names and say which files went in."""
    inputs = cfg.inputs()
    output = output_path(cfg.output, "output")
    if any(output.resolve() == p.resolve() for p in inputs):
        raise ConfigError(f"output={cfg.output} is one of the checkpoints: it would be replaced")
    average_checkpoints(inputs, output)
    for path in inputs:
        print(f"  {path}")
    print(f"{output}: the mean of these {len(inputs)} checkpoints")


if __name__ == "__main__":
    main()
