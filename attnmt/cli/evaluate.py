"""attnmt-evaluate ckpt=PATH: BLEU and chrF of a trained model on test sets, with a JSON report."""

import json
from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import output_path
from attnmt.errors import ConfigError
from attnmt.infer.evaluate import TestSet, evaluate_sets, processed_sets
from attnmt.runtime import keep_freed_memory, set_threads


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions(ModelToolOptions):
    """attnmt-evaluate's keys; configs/tools/evaluate.yaml documents them."""

    sets: list[str] | None
    source: str | None
    reference: str | None
    output_dir: str | None
    report: str | None


def main() -> None:
    run_tool("evaluate", EvaluateOptions, run)


def run(cfg: EvaluateOptions) -> None:
    """Evaluate what `cfg` names, as the module docstring says."""
    set_threads(cfg.threads)
    keep_freed_memory()
    checkpoints = [cfg.ckpt] if isinstance(cfg.ckpt, str) else cfg.ckpt
    checkpoint = Path(checkpoints[0]) if checkpoints else Path()
    if bool(cfg.source) != bool(cfg.reference):
        raise ConfigError("source=FILE and reference=FILE go together")
    output_dir = output_path(cfg.output_dir or checkpoint.parent / "eval", "output_dir", True)
    report = output_path(cfg.report or output_dir / "report.json", "report")
    translator = cfg.load()
    # Without sets=, the test split of the checkpoint's data, unless a source file is given.
    names = cfg.sets if cfg.sets is not None else ([] if cfg.source else ["test"])
    sets = processed_sets(translator, names)
    if cfg.source:
        sets.append(TestSet(Path(cfg.source).stem, Path(cfg.source), Path(cfg.reference)))
    if not sets:
        raise ConfigError("sets=[]: nothing to evaluate; name sets or give source= reference=")
    entries = evaluate_sets(translator, sets, cfg.search, output_dir)
    report.write_text(
        json.dumps({"checkpoint": cfg.ckpt, "sets": entries}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    for entry in entries:
        print(
            f"{entry['name']}: BLEU {entry['bleu']:.2f}  chrF {entry['chrf']:.2f}  "
            f"{entry['signature']}"
        )
    print(f"report: {report}")


if __name__ == "__main__":
    main()
