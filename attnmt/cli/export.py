"""attnmt-export ckpt=PATH output=MODEL.pt: write the inference-only file of a checkpoint."""

from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import run_tool
from attnmt.config import output_path
from attnmt.errors import ConfigError
from attnmt.infer.checkpoint import EXPORT_DTYPES, export_payload, load_checkpoint, save_checkpoint


@dataclass(frozen=True)
class ExportOptions:
    """attnmt-export's keys; configs/tools/export.yaml documents them."""

    ckpt: str
    output: str
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in EXPORT_DTYPES:
            raise ConfigError(f"dtype={self.dtype!r}: must be one of {', '.join(EXPORT_DTYPES)}")


def main() -> None:
    run_tool("export", ExportOptions, run)


def run(cfg: ExportOptions) -> None:
    """Export what `cfg` names and print both files' sizes."""
    source = Path(cfg.ckpt)
    output = output_path(cfg.output, "output")
    if output.resolve() == source.resolve():
        raise ConfigError(f"output={cfg.output} is the checkpoint: writing it would replace it")
    saved = load_checkpoint(source, "cpu", mmap=True)
    save_checkpoint(export_payload(saved, source, cfg.dtype), output)
    before, after = source.stat().st_size / 2**20, output.stat().st_size / 2**20
    print(f"{source}: {before:,.1f} MB")
    print(f"{output}: {after:,.1f} MB ({cfg.dtype}, {after / before:.0%} of the checkpoint)")


if __name__ == "__main__":
    main()
