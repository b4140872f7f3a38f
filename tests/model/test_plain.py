"""The plain model (`model.fast=false`) trains, translates and saves what the fast path loads;
files written before the fast twins existed load and translate as they did."""

import json
from pathlib import Path

import pytest
import torch

from attnmt.infer.checkpoint import load_checkpoint
from attnmt.infer.translate import Translator
from attnmt.model.accelerate import TWINS
from attnmt.model.build import build_model
from attnmt.runtime import cpu_has_bf16
from tests.conftest import compose_config, plain, tiny_train_overrides

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
TWIN_TYPES = tuple(TWINS.values())


def has_twins(model):
    return any(isinstance(m, TWIN_TYPES) for m in model.modules())


def test_a_plain_run_trains_translates_and_saves_what_the_fast_model_loads(tmp_path, tiny_corpus):
    from attnmt.train.build import build_trainer

    overrides = [
        *tiny_train_overrides(tiny_corpus, tmp_path / "data"),
        "model.fast=false",
        "trainer.max_steps=30",
    ]
    run = tmp_path / "run"
    run.mkdir()
    trainer = build_trainer(plain(compose_config("train", overrides)), run)
    assert not has_twins(trainer.model)
    trainer.fit()
    sentences = ["我很好。", "他走了。", "我们明天去公园。"]
    translator = Translator.load(run / "best.pt")
    assert not has_twins(translator.model)  # the run's config says plain
    found = translator.translate(sentences, beam_size=3)
    assert all(t.text for t in found)
    saved = load_checkpoint(run / "best.pt", "cpu")
    sizes = [
        len(saved["model"][name]) for name in ("encoder.embedding.weight", "decoder.output.bias")
    ]
    fast = build_model(saved["config"], *sizes, fast=True)
    assert has_twins(fast)
    fast.load_state_dict(saved["model"])  # the same keys, the same file
    translator.model = fast.eval()
    assert [t.text for t in translator.translate(sentences, beam_size=3)] == [t.text for t in found]


LOADS = {
    "beam5": ({}, {"beam_size": 5}),
    "greedy": ({}, {"beam_size": 1}),
    "int8": ({"quantize": "int8"}, {"beam_size": 5}),
    "bf16": ({"dtype": "bfloat16"}, {"beam_size": 5}),
}


@pytest.mark.parametrize("name", ["checkpoint.pt", "export.pt"])
@pytest.mark.parametrize("how", LOADS)
def test_files_written_before_the_fast_twins_translate_as_they_did(name, how):
    if how == "bf16" and not cpu_has_bf16():
        pytest.skip("this CPU has no native bf16")
    recorded = json.loads((LEGACY / "translations.json").read_text(encoding="utf-8"))
    load, search = LOADS[how]
    translator = Translator.load(LEGACY / name, "cpu", **load)
    assert has_twins(translator.model)  # an older config has no model.fast: fast
    if how == "int8":
        dynamic = "torch.ao.nn.quantized.dynamic"
        kinds = {
            type(m).__name__ for m in translator.model.modules() if dynamic in type(m).__module__
        }
        assert {"Linear", "GRU"} <= kinds  # quantized as before, not left fp32 as twins
        assert not any(isinstance(m, torch.nn.Linear) for m in translator.model.modules())
    found = [t.text for t in translator.translate(recorded["sentences"], **search)]
    assert found == recorded["expected"][f"{name}/{how}"]
