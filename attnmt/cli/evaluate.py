"""attnmt-evaluate ckpt=PATH: BLEU and chrF of a trained model on test sets, with a JSON report."""

import json
from dataclasses import dataclass
from pathlib import Path

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import output_path
from attnmt.errors import ConfigError
from attnmt.evaluate import TestSet, evaluate_sets, processed_sets
from attnmt.runtime import keep_freed_memory, pick_device, set_threads
from attnmt.translate import SearchConfig, load_model


@dataclass(frozen=True)
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
    device = pick_device(cfg.device, "device")
    checkpoint = Path(cfg.ckpt)
    loaded = load_model(checkpoint, device)
    sets = processed_sets(loaded, list(cfg.sets or []))
    if bool(cfg.source) != bool(cfg.reference):
        raise ConfigError("source=FILE and reference=FILE go together")
    if cfg.source:
        sets.append(TestSet(Path(cfg.source).stem, Path(cfg.source), Path(cfg.reference)))
    search = SearchConfig(
        cfg.beam_size, 1, cfg.alpha, cfg.max_length_a, cfg.max_length_b, cfg.batch_tokens
    )
    output_dir = output_path(cfg.output_dir or checkpoint.parent / "eval", "output_dir", True)
    report = output_path(cfg.report or output_dir / "report.json", "report")
    entries = evaluate_sets(loaded, sets, search, device, cfg.max_input_length, output_dir)
    report.write_text(
        json.dumps({"checkpoint": str(checkpoint), "sets": entries}, indent=2, ensure_ascii=False)
        + "\n",
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
