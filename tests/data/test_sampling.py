"""Subword regularization: sampled segmentations of the training split, never of the text."""

import numpy as np
import pytest

from attnmt.data.dataset import ParallelData
from attnmt.data.sampling import SampledData
from attnmt.data.tokenizer import load_sentencepiece
from attnmt.errors import ConfigError
from attnmt.infer.translate import Translator
from tests.train.test_trainer import losses, make_trainer


@pytest.fixture(scope="module")
def prepared(trained_run):
    folder = Translator.load(trained_run / "best.pt").dataset_folder
    models = {lang: load_sentencepiece(folder / f"spm.{lang}.model") for lang in ("zh", "en")}
    return folder, models


def sampled(prepared, seed=7, alpha=0.1):
    folder, models = prepared
    return SampledData(folder, "train", models, "zh", "en", alpha, -1, seed)


def segmentations(data, epoch):
    data.token_batches(512, 1, epoch)
    return [data.source[i].tolist() for i in range(len(data))]


def test_each_epoch_draws_a_new_segmentation_of_the_same_text(prepared):
    folder, models = prepared
    fixed = ParallelData(folder, "train", "zh", "en")
    data = sampled(prepared)
    first, second = segmentations(data, 0), segmentations(data, 1)
    assert sum(a != b for a, b in zip(first, second, strict=True)) > len(first) // 4
    for epoch in (0, 1):
        data.sample(epoch)
        for i in range(len(fixed)):
            for side, lang in ((data.source, "zh"), (data.target, "en")):
                fixed_side = fixed.source if lang == "zh" else fixed.target
                decoded = models[lang].decode(side[i].tolist())
                assert decoded == models[lang].decode(fixed_side[i].tolist())
    batch = data.batch(data.token_batches(512, 1, 1)[0])
    assert batch.source.shape[0] == batch.target.shape[0] > 0


def test_the_same_seed_and_epoch_draw_the_same_segmentation(prepared):
    assert segmentations(sampled(prepared), 3) == segmentations(sampled(prepared), 3)
    assert segmentations(sampled(prepared, seed=8), 3) != segmentations(sampled(prepared), 3)


def test_sampling_leaves_dev_alone_and_runs_resume_exactly(tiny_corpus, tmp_path):
    options = ["trainer.sampling_alpha=0.1", "trainer.max_steps=12"]
    trainer = make_trainer(tiny_corpus, tmp_path, "whole", *options)
    assert isinstance(trainer.train_data, SampledData)
    dev = trainer.validate.data
    assert isinstance(dev, ParallelData) and not isinstance(dev, SampledData)
    trainer.fit()
    make_trainer(tiny_corpus, tmp_path, "split", options[0], "trainer.max_steps=5").fit()
    make_trainer(tiny_corpus, tmp_path, "split", *options, "trainer.resume=auto").fit()
    assert losses(tmp_path / "split") == losses(tmp_path / "whole")
    plain_run = make_trainer(tiny_corpus, tmp_path, "plain", "trainer.max_steps=12")
    assert type(plain_run.train_data) is ParallelData
    plain_run.fit()
    assert losses(tmp_path / "plain") != losses(tmp_path / "whole")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.sampling_alpha=0.1", "trainer.sampling_nbest_size=1"], "would not sample"),
        (["trainer.sampling_alpha=1.5", "data.vocab.model_type=bpe"], "below 1"),
    ],
)
def test_impossible_sampling_settings_are_refused(tiny_corpus, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        make_trainer(tiny_corpus, tmp_path, "run", *overrides)


def test_sampled_ids_have_the_token_ids_shape(prepared):
    data = sampled(prepared)
    data.sample(0)
    assert data.source.lengths.dtype == np.int64 and len(data.source) == len(data)
