"""trainer.init: a new run that starts from a trained model's weights, architecture and
SentencePiece models (fine-tuning), and the errors that name the key."""

import hashlib
import json
import shutil

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.infer.checkpoint import RunDir, load_checkpoint
from attnmt.train.build import build_trainer
from tests.conftest import FIXTURE_CORPUS, compose_config, plain, tiny_train_overrides
from tests.train.test_trainer import losses


@pytest.fixture(scope="module")
def new_corpus(tmp_path_factory):
    """Pairs the tiny model never saw: lines 400-800 of the fixture corpus."""
    path = tmp_path_factory.mktemp("new") / "cmn-new.txt"
    lines = FIXTURE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[400:800]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def alone(trained_run, tmp_path):
    """The tiny run's best.pt copied alone to a folder of its own."""
    folder = tmp_path / "model"
    folder.mkdir()
    return shutil.copy(trained_run / "best.pt", folder / "model.pt")


def trainer_for(corpus, tmp_path, run, overrides):
    config = plain(
        compose_config("train", [*tiny_train_overrides(corpus, tmp_path / "data"), *overrides])
    )
    run_dir = tmp_path / run
    run_dir.mkdir(exist_ok=True)
    return build_trainer(config, run_dir, overrides)


def test_a_checkpoint_copied_alone_fine_tunes_on_a_new_corpus(alone, new_corpus, tmp_path):
    saved = load_checkpoint(alone)
    trainer = trainer_for(
        new_corpus, tmp_path, "tuned", [f"trainer.init={alone}", "trainer.max_steps=4"]
    )
    for name, value in trainer.model.state_dict().items():  # starts from the checkpoint
        torch.testing.assert_close(value, saved["model"][name].float())
    folder = trainer.validate.translator.dataset_folder
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    for lang in ("zh", "en"):  # tokenised with the checkpoint's own models, and says so
        model = saved["tokenizers"][lang]["model"]
        assert (folder / f"spm.{lang}.model").read_bytes() == model
        assert manifest["given_tokenizers"][lang] == hashlib.sha256(model).hexdigest()
    trainer.fit()
    tuned = losses(tmp_path / "tuned")
    assert [step for step, _ in tuned] == [1, 2, 3, 4]  # a new run: progress from zero
    fresh = trainer_for(new_corpus, tmp_path, "fresh", ["trainer.max_steps=1"])
    fresh.fit()
    assert tuned[0][1] < losses(tmp_path / "fresh")[0][1]  # what it learned carries over
    best = load_checkpoint(RunDir(tmp_path / "tuned").last)
    assert best["tokenizers"]["zh"]["sha256"] == saved["tokenizers"]["zh"]["sha256"]


def test_an_export_starts_a_run_and_init_only_starts_runs(trained_run, new_corpus, tmp_path):
    export = RunDir(trained_run).kept_files()[0]  # an inference-only file
    options = [f"trainer.init={export}", "trainer.resume=auto"]
    trainer_for(new_corpus, tmp_path, "run", [*options, "trainer.max_steps=2"]).fit()
    again = trainer_for(new_corpus, tmp_path, "run", [*options, "trainer.max_steps=4"])
    assert again.progress.step == 2  # resumed from last.pt, not started again from the export
    again.fit()
    assert [step for step, _ in losses(tmp_path / "run")] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "override,key",
    [
        ("attention=coverage", "attention"),
        ("decoder.hidden_size=64", "decoder.hidden_size"),
        ("data.vocab.tgt_size=300", "data.vocab.tgt_size"),
    ],
)
def test_an_override_the_checkpoint_contradicts_names_its_key(
    alone, new_corpus, tmp_path, override, key
):
    with pytest.raises(ConfigError, match=rf"^{key}=.*trainer.init="):
        trainer_for(new_corpus, tmp_path, "run", [f"trainer.init={alone}", override])


def test_an_override_the_checkpoint_agrees_with_is_fine(alone, new_corpus, tmp_path):
    trainer_for(new_corpus, tmp_path, "run", [f"trainer.init={alone}", "decoder.hidden_size=128"])


def test_bad_init_files_name_the_key(alone, new_corpus, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n", encoding="utf-8")
    cases = [
        ([f"trainer.init={tmp_path / 'missing.pt'}"], r"^trainer.init=.*missing.pt: no such file"),
        ([f"trainer.init={text}"], r"^trainer.init=.*notes.txt: .*not a checkpoint"),
        ([f"trainer.init={tmp_path}"], r"^trainer.init=.*: a folder; name a checkpoint in it"),
        (
            [f"trainer.init={alone}", "data.src_lang=en", "data.tgt_lang=zh"],
            r"^trainer.init=.*a zh->en model, but data.src_lang=en",
        ),
    ]
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message):
            trainer_for(new_corpus, tmp_path, "run", overrides)


def test_the_finetune_recipe_lowers_the_learning_rate_and_stops_early():
    config = plain(compose_config("train", ["+experiment=finetune", "trainer.init=x.pt"]))
    default = plain(compose_config("train", []))["trainer"]
    assert config["trainer"]["init"] == "x.pt"
    assert config["trainer"]["lr"] < default["lr"] and config["trainer"]["patience"] is not None


def test_the_finetune_recipe_without_a_model_is_an_error_naming_trainer_init():
    with pytest.raises(ConfigError, match=r"^no value for trainer.init: give trainer.init="):
        plain(compose_config("train", ["+experiment=finetune"]))


def test_a_whole_data_group_override_is_not_a_conflict(alone, new_corpus, tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    pairs = [line.split("\t")[:2] for line in new_corpus.read_text(encoding="utf-8").splitlines()]
    (folder / "a.en").write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    (folder / "a.zh").write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    overrides = [
        f"trainer.init={alone}",
        "data=files",
        f"data.en_path={folder / 'a.en'}",
        f"data.zh_path={folder / 'a.zh'}",
        "trainer.max_steps=1",
    ]
    trainer_for(new_corpus, tmp_path, "run", overrides).fit()
