"""attnmt-train: prepare the data if needed, train, and print the best dev BLEU."""

import logging
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnmt.cli.common import CONFIG_PATH, plain, user_errors
from attnmt.train import processes
from attnmt.train.build import build_trainer
from attnmt.train.lock import RunLock


@hydra.main(config_path=CONFIG_PATH, config_name="train", version_base="1.3")
@user_errors
def main(cfg: DictConfig) -> float | None:
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = [str(o) for o in hydra_cfg.overrides.task]
    config = plain(cfg)
    ranks = processes.count(config, overrides)
    if ranks > 1:  # this process only starts them: rank 0 holds the run's lock and prints
        status = processes.run_ranks(ranks, overrides, run_dir, cfg.trainer.batch_tokens)
        if status:
            sys.exit(status)
        return None
    main_rank = int(os.environ.get("RANK", "0")) == 0
    if not main_rank:  # rank 0 speaks for all; the others only warn
        logging.getLogger("attnmt").setLevel(logging.WARNING)
    # One live run per directory; under torchrun, rank 0 holds it for all ranks.
    lock = RunLock(run_dir) if main_rank else None
    try:
        logging.getLogger("attnmt").info("run directory: %s", run_dir)
        trainer = build_trainer(config, run_dir, overrides)
        # (after building: trainer.init puts its checkpoint's architecture into the config)
        OmegaConf.save(OmegaConf.create(trainer.identity["config"]), run_dir / "config.yaml")
        summary = trainer.fit()
    finally:
        if lock:
            lock.release()
    if main_rank:
        print(summary.describe())
    return summary.best_score


if __name__ == "__main__":
    main()
