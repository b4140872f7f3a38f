"""From a resolved config to a ready `Trainer`: the one place that wires data, tokenizers,
model, loss, optimizer, schedule and validation together (the trainer knows none of them by
name)."""

from __future__ import annotations

import logging
import random
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from attnmt.config import to_dataclass
from attnmt.data.config import DataConfig, spm_model_name
from attnmt.data.dataset import ParallelData
from attnmt.data.guide import AlignmentGuide, build_alignments
from attnmt.data.prepare import prepare_dataset
from attnmt.data.sampling import SampledData
from attnmt.data.tokenizer import load_sentencepiece
from attnmt.errors import ConfigError
from attnmt.infer.checkpoint import tokenizer_entry
from attnmt.infer.translate import SearchConfig, Translator
from attnmt.model.build import build_model
from attnmt.model.seq2seq import parameter_summary
from attnmt.runtime import (
    amp_dtype,
    flush_denormals,
    keep_freed_memory,
    limit_onednn_cache,
    set_threads,
)
from attnmt.train import distributed
from attnmt.train.init import adopt, read_start
from attnmt.train.loss import TokenLoss
from attnmt.train.schedule import Schedule, build_optimizer
from attnmt.train.state import TrainerConfig
from attnmt.train.trainer import Trainer
from attnmt.train.validate import Validator

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def open_dataset(
    cfg: DataConfig,
    ranks: distributed.Ranks,
    given: dict[str, bytes] | None = None,
    aligned: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Prepare the dataset, tokenised with the `given` SentencePiece models if any, and with
    `aligned` eflomal's links of its training split for guided alignment (rank 0 builds them,
    the others wait and find them ready)."""
    if not ranks.main:
        distributed.barrier()
    folder, manifest, _ = prepare_dataset(cfg, given)
    if aligned:
        build_alignments(folder, cfg.src_lang, cfg.tgt_lang)
    if ranks.main:
        distributed.barrier()
    return folder, manifest


def validation_search(cfg: TrainerConfig) -> SearchConfig:
    """How validation decodes the dev set (TrainerConfig has checked the trainer.val_* keys)."""
    return SearchConfig(
        beam_size=cfg.val_beam_size,
        max_length_a=cfg.val_max_length_a,
        max_length_b=cfg.val_max_length_b,
        batch_tokens=cfg.batch_tokens,
    )


def training_data(
    cfg: TrainerConfig, data_cfg: DataConfig, folder: Path, models: dict[str, Any]
) -> ParallelData:
    """The training split: its fixed segmentation, or one sampled anew each epoch
    (trainer.sampling_alpha, see `attnmt.data.sampling`)."""
    src, tgt = data_cfg.src_lang, data_cfg.tgt_lang
    if cfg.sampling_alpha is None:
        return ParallelData(folder, "train", src, tgt)
    if data_cfg.vocab.model_type == "bpe" and cfg.sampling_alpha >= 1:
        raise ConfigError(
            f"trainer.sampling_alpha={cfg.sampling_alpha}: for bpe models it is the dropout "
            "probability of each merge, below 1"
        )
    alpha, nbest, seed = cfg.sampling_alpha, cfg.sampling_nbest_size, cfg.seed
    return SampledData(folder, "train", models, src, tgt, alpha, nbest, seed)


def guide_training(
    cfg: TrainerConfig,
    data_cfg: DataConfig,
    folder: Path,
    models: dict[str, Any],
    data: ParallelData,
) -> None:
    """With trainer.guided_alignment, give the training batches eflomal's alignment (built
    into the processed folder by `open_dataset`; `attnmt.data.guide`)."""
    if cfg.guided_alignment:
        data.follow(AlignmentGuide(folder, data_cfg.src_lang, data_cfg.tgt_lang), models)


def build_trainer(
    config: dict[str, Any], run_dir: Path, overrides: Collection[str] = ()
) -> Trainer:
    """The trainer of a resolved config (the `train` config), writing into `run_dir`.
    `overrides`: the command line's, which trainer.init checks against its checkpoint."""
    cfg = to_dataclass(TrainerConfig, config["trainer"], "trainer")
    start = read_start(cfg.init) if cfg.init else None
    if start:  # the checkpoint's architecture and vocabulary (attnmt.train.init)
        config = adopt(config, start, overrides)
    data_cfg = to_dataclass(DataConfig, config["data"], "data")
    search = validation_search(cfg)
    ranks, device = distributed.start(cfg.device)
    set_threads(cfg.threads)
    # The run's config says what it ran with: processes=auto's choice, threads=null's count.
    chosen = {"processes": str(ranks.world), "threads": torch.get_num_threads()}
    config = {**config, "trainer": {**config["trainer"], **chosen}}
    keep_freed_memory()
    limit_onednn_cache()
    flush_denormals()
    torch.use_deterministic_algorithms(cfg.deterministic)
    seed_everything(cfg.seed)
    folder, manifest = open_dataset(
        data_cfg, ranks, start.tokenizers if start else None, cfg.guided_alignment > 0
    )
    src, tgt = data_cfg.src_lang, data_cfg.tgt_lang
    # The tokenizers never change during a run: read once, into every checkpoint.
    files = {lang: folder / spm_model_name(data_cfg, lang) for lang in (src, tgt)}
    tokenizers = {lang: tokenizer_entry(path) for lang, path in files.items()}
    models = {lang: load_sentencepiece(path) for lang, path in files.items()}
    train_data = training_data(cfg, data_cfg, folder, models)
    guide_training(cfg, data_cfg, folder, models, train_data)
    dev_data = ParallelData(folder, "dev", src, tgt)
    if not len(dev_data):
        raise ConfigError(
            f"data.dev_size={data_cfg.dev_size}: the dev split is empty, and training "
            "validates on it (dev BLEU picks best.pt); set data.dev_size to 1 or more"
        )
    vocab = manifest["vocab"]
    model = build_model(config, vocab[src]["size"], vocab[tgt]["size"]).to(device)
    log.info("model parameters:\n%s", parameter_summary(model))
    if start:  # a resume (trainer.resume) replaces these with its own
        # an export may hold them at half width; integer buffers stay as they are
        weights = {k: v.float() if v.is_floating_point() else v for k, v in start.weights.items()}
        model.load_state_dict(weights)
        log.info("trainer.init: the model starts from the weights of %s", start.path)
    precision = amp_dtype(cfg.amp, device)
    log.info("training precision: %s", "fp32" if precision is None else f"{precision} autocast")
    if cfg.compile:
        model.decoder.compile_step()
    objective: torch.nn.Module = TokenLoss(model, cfg.label_smoothing, cfg.guided_alignment)
    if ranks.world > 1:
        ids = [device.index] if device.type == "cuda" else None
        objective = DistributedDataParallel(objective, device_ids=ids)
    optimizer = build_optimizer(
        model.parameters(), cfg.optimizer, cfg.lr, cfg.betas, cfg.weight_decay
    )

    def batches_per_epoch() -> int:
        return len(train_data.token_batches(cfg.batch_tokens, cfg.seed, 0))

    total_steps = cfg.expected_steps(batches_per_epoch, ranks.world)
    # A step budget alone sets the schedule's length: max_time then only caps the run, so
    # the learning rate never follows the machine's clock.
    schedule = Schedule(
        optimizer,
        cfg.schedule,
        cfg.lr,
        cfg.warmup_steps,
        cfg.min_lr,
        total_steps,
        cfg.max_time * 60 if cfg.max_time and total_steps is None else None,
        cfg.plateau_patience,
        cfg.plateau_factor,
    )
    translator = Translator(model, models[src], models[tgt], config, device, folder)
    validator = Validator(translator, dev_data, folder, "dev", search, cfg.samples)
    return Trainer(
        cfg,
        run_dir,
        model,
        objective,
        optimizer,
        schedule,
        train_data,
        validator,
        ranks,
        device,
        identity={"config": config, "tokenizers": tokenizers},
    )
