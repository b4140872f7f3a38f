"""Shared fixtures: the shared corpus, small slices of it, and configs composed by Hydra."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from attnmt.cli.common import plain  # noqa: F401  (tests import it from here)

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (registered in sys.modules, where dataclasses look it up)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_script_main(name: str, monkeypatch, capsys, *arguments: str) -> tuple[int, str, str]:
    """scripts/NAME.py's exit status, output and errors on `arguments`, in this process."""
    monkeypatch.setattr(sys, "argv", [str(REPO / "scripts" / f"{name}.py"), *arguments])
    try:
        load_script(name).main()
        status = 0
    except SystemExit as done:
        status = done.code
    out, err = capsys.readouterr()
    return status, out, err


def needs_shared_corpus() -> Path:
    """The shared corpus, or a visible skip when ../shared is not beside the checkout."""
    if not SHARED_CORPUS.is_file():
        pytest.skip(f"shared corpus not found at {SHARED_CORPUS}")
    return SHARED_CORPUS


def compose_config(config_name: str, overrides: list[str]) -> DictConfig:
    """A config composed from configs/ exactly as the CLI would, with `overrides`."""
    with initialize_config_module(config_module="attnmt.configs", version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides)


@pytest.fixture(autouse=True)
def denormals_kept_between_tests():
    """Each test starts with torch's default, denormal floats kept: building a trainer flushes
    them to zero on this thread (`attnmt.runtime.flush_denormals`), which would otherwise carry
    into the tests after it."""
    yield
    torch.set_flush_denormal(False)


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    return needs_shared_corpus()


FIXTURE_CORPUS = REPO / "tests" / "fixtures" / "cmn-1200.txt"  # with its attribution


@pytest.fixture(scope="session")
def small_corpus() -> Path:
    """The first 1,200 lines of the Tatoeba corpus (short sentences, with shared translations),
    shipped in tests/fixtures so the suite needs no ../shared."""
    return FIXTURE_CORPUS


def small_data_overrides(corpus: Path, processed: Path) -> list[str]:
    """Overrides that turn the default data config into a fast one over `corpus`."""
    return [
        f"data.raw_path={corpus}",
        "data.sha256=null",
        f"data.processed_dir={processed}",
        "data.dev_size=100",
        "data.test_size=100",
        "data.vocab.src_size=1000",
        "data.vocab.tgt_size=600",
    ]


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """The first 400 lines of the fixture corpus: enough for a model to learn by heart."""
    path = tmp_path_factory.mktemp("tiny") / "cmn-tiny.txt"
    lines = FIXTURE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:400]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def tiny_train_overrides(corpus: Path, processed: Path) -> list[str]:
    """A small model on a tiny corpus, one CPU thread, deterministic: seconds per run."""
    return [
        f"data.raw_path={corpus}",
        "data.sha256=null",
        f"data.processed_dir={processed}",
        "data.dev_size=20",
        "data.test_size=20",
        "data.vocab.src_size=450",
        "data.vocab.tgt_size=250",
        "encoder.embedding_dim=64",
        "encoder.hidden_size=64",
        "decoder.embedding_dim=64",
        "decoder.hidden_size=128",
        "encoder.dropout=0.1",
        "decoder.dropout=0.1",
        "attention.attn_dim=64",
        "trainer.lr=0.005",
        "trainer.schedule=constant",
        "trainer.warmup_steps=0",
        "trainer.batch_tokens=512",
        "trainer.label_smoothing=0.0",
        "trainer.threads=1",
        "trainer.deterministic=true",
        "trainer.log_every=1",
        "trainer.validate_every=1000",
        "trainer.checkpoint_every=1000",
        "trainer.patience=null",
        "trainer.max_time=null",
    ]


def train_run(root: Path, overrides: list[str]) -> Path:
    """root/run, trained to the end with the train config and `overrides`."""
    from attnmt.train.build import build_trainer

    run_dir = root / "run"
    run_dir.mkdir()
    build_trainer(plain(compose_config("train", overrides)), run_dir).fit()
    return run_dir


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_corpus) -> Path:
    """A run directory whose best.pt learned the tiny corpus a little (a few seconds); it
    keeps its 3 best checkpoints as best.step{N}.pt."""
    root = tmp_path_factory.mktemp("trained")
    overrides = [
        *tiny_train_overrides(tiny_corpus, root / "data"),
        "trainer.max_steps=60",
        "trainer.keep_best=3",
    ]
    return train_run(root, overrides)


def made_up_corpus(path: Path) -> Path:
    """60 made-up Tatoeba-style pairs over 16 Chinese characters (subject, verb, object), so a
    test can name characters the training data never had."""
    import itertools

    subjects = {"我": "I", "你": "You", "他": "He", "她": "She", "我们": "We"}
    verbs = {"喜欢": "like", "看": "see", "吃": "eat"}
    objects = {"苹果": "apples", "书": "books", "鱼": "fish", "米饭": "rice"}
    lines = [
        f"{s_en} {v_en} {o_en}.\t{s_zh}{v_zh}{o_zh}。\tmade up for the tests\n"
        for (s_zh, s_en), (v_zh, v_en), (o_zh, o_en) in itertools.product(
            subjects.items(), verbs.items(), objects.items()
        )
    ]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def byte_fallback_run(tmp_path_factory) -> Path:
    """A run directory whose best.pt trained a few steps on `made_up_corpus` with
    data.vocab.byte_fallback=true: its Chinese vocabulary is the 16 characters, the 256 byte
    pieces and a few more."""
    root = tmp_path_factory.mktemp("bytes")
    overrides = [
        *tiny_train_overrides(made_up_corpus(root / "made-up.txt"), root / "data"),
        "data.dev_size=5",
        "data.test_size=5",
        "data.vocab.src_size=280",
        "data.vocab.tgt_size=26",
        "data.vocab.byte_fallback=true",
        "trainer.max_steps=20",
    ]
    return train_run(root, overrides)
