"""attnmt-serve models={NAME: PATH, ...}: several named models, a request's `model`, the health
listing, and the hard alignment that comes with the attention."""

import subprocess

import pytest

from attnmt.cli.common import tool_config
from attnmt.cli.serve import ServeOptions
from attnmt.errors import ConfigError
from attnmt.infer.translate import Translator
from attnmt.serve.models import DEFAULT_MODEL, named_models
from attnmt.vocab import EOS_PIECE
from tests.serve.conftest import SERVE, request, two_models

SENTENCES = ["我很好。", "我们明天去公园。"]


def serve_config(*arguments):
    return tool_config("serve", list(arguments), ServeOptions)


def test_models_keep_their_order_and_a_value_may_be_an_ensemble():
    cfg = serve_config("models={dot: B.pt, additive: A.pt, both: [A.pt, B.pt]}")
    assert cfg.ckpt is None
    assert named_models(cfg.ckpt, cfg.models) == {
        "dot": "B.pt",
        "additive": "A.pt",
        "both": ["A.pt", "B.pt"],
    }
    assert list(named_models(cfg.ckpt, cfg.models)) == ["dot", "additive", "both"]


def test_ckpt_serves_one_model_named_default():
    cfg = serve_config("ckpt=A.pt")
    assert DEFAULT_MODEL == "default"
    assert named_models(cfg.ckpt, cfg.models) == {"default": "A.pt"}
    cfg = serve_config("ckpt=[A.pt,B.pt]")
    assert named_models(cfg.ckpt, cfg.models) == {"default": ["A.pt", "B.pt"]}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["ckpt=A.pt", "models={a: B.pt}"], r"^ckpt and models: give one of them"),
        ([], r"needs ckpt=PATH or models="),
        (["models={}"], r"^models=\{\}: name at least one model"),
        (["models=A.pt"], r"^models='A.pt': expected dict or null"),
        (["models=[A.pt]"], r"^models=\['A.pt'\]: expected dict or null"),
        (["models={a: 5}"], r"^models.a=5: expected a checkpoint file"),
        (["models={a: []}"], r"^models.a=\[\]: expected a checkpoint file"),
        (["models={a: [A.pt, 3]}"], r"^models.a=\['A.pt', 3\]: expected a checkpoint file"),
        (["models={a: {b: A.pt}}"], r"^models.a=\{'b': 'A.pt'\}: expected"),
        (['models={"a b": A.pt}'], r"^models: 'a b' is not a model name"),
        (["models={7: A.pt}"], r"^models: 7 is not a model name"),
        (["models={a: A.pt"], r"^models=\{a: A.pt: cannot read it"),
        (["models={a: A.pt, a: B.pt}"], r"^models=.*: cannot read it"),
    ],
)
def test_bad_models_are_one_config_error_naming_the_key(arguments, message):
    with pytest.raises(ConfigError, match=message):
        serve_config(*arguments)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["models={a: x.pt}", "ckpt=y.pt"], "error: ckpt and models: give one of them"),
        (["models=0"], "error: models=0: expected dict or null"),
    ],
)
def test_attnmt_serve_exits_2_with_one_line_on_bad_models(arguments, message):
    result = subprocess.run([SERVE, *arguments], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    assert result.stderr.startswith(message), result.stderr


def test_health_lists_the_models_the_first_the_default(models_service):
    status, health = request(models_service.url + "/v1/health")
    assert status == 200 and health["default_model"] == "best"
    assert [m["name"] for m in health["models"]] == ["best", "early", "both"]
    for model in health["models"]:
        assert (model["src_lang"], model["tgt_lang"], model["tgt_vocab"]) == ("zh", "en", 250)
    sizes = {m["name"]: m["parameters"] for m in health["models"]}
    assert sizes["best"] == sizes["early"] == health["parameters"]  # the top: the default's
    assert sizes["both"] == 2 * sizes["best"]  # the ensemble holds both


def test_one_model_is_listed_as_default(service):
    status, health = request(service.url + "/v1/health")
    assert status == 200 and health["default_model"] == "default"
    assert [m["name"] for m in health["models"]] == ["default"]


def test_a_request_translates_with_the_model_it_names_the_first_by_default(
    models_service, trained_run
):
    best, early = two_models(trained_run).values()
    expected = {
        name: Translator.load(paths).translate(SENTENCES, beam_size=3)
        for name, paths in (("best", best), ("early", early), ("both", [best, early]))
    }
    scores = {name: [t.hypotheses[0].score for t in found] for name, found in expected.items()}
    assert scores["best"] != pytest.approx(scores["early"], abs=1e-3)  # models that differ
    for name in ("best", "early", "both", None):
        body = {"text": SENTENCES, "beam_size": 3}
        if name is not None:
            body["model"] = name
        status, answer = models_service.translate(body)
        assert status == 200 and answer["model"] == (name or "best")
        translations = answer["translations"]
        assert [t["text"] for t in translations] == [t.text for t in expected[name or "best"]]
        got = [t["hypotheses"][0]["score"] for t in translations]
        assert got == pytest.approx(scores[name or "best"], abs=1e-3), name


def test_an_unknown_model_gets_404_naming_the_models_there_are(models_service, service):
    status, answer = models_service.translate({"text": ["好"], "model": "dot"})
    assert status == 404
    assert answer["error"] == "model: no model 'dot'; the models: best, early, both"
    status, answer = service.translate({"text": ["好"], "model": "best"})
    assert status == 404 and answer["error"].endswith("the models: default")
    assert service.translate({"text": ["好"], "model": "default"})[0] == 200
    status, answer = service.translate({"text": ["好"], "model": 1})
    assert status == 422 and "model: Input should be a valid string" in answer["error"]


def test_attention_comes_with_the_hard_alignment_over_its_pieces(models_service, trained_run):
    body = {"text": SENTENCES, "beam_size": 3, "n_best": 2, "attention": True, "model": "early"}
    status, answer = models_service.translate(body)
    assert status == 200
    translator = Translator.load(two_models(trained_run)["early"])
    found = translator.translate(SENTENCES, beam_size=3, n_best=2, attention=True)
    linked = 0
    for text, translation, mine in zip(SENTENCES, answer["translations"], found, strict=True):
        expected = translator.piece_links(text, mine)
        for hypothesis, links in zip(translation["hypotheses"], expected, strict=True):
            assert hypothesis["alignment"] == [list(link) for link in links]
            # neither the EOS row nor the EOS column is ever linked
            rows = len(hypothesis["attention"]) - (hypothesis["target_pieces"][-1] == EOS_PIECE)
            columns = len(translation["source_pieces"]) - 1
            assert all(0 <= t < rows and 0 <= s < columns for s, t in links)
            linked += len(links)
    assert linked > 0
    plain = models_service.translate({"text": SENTENCES})[1]
    assert all("alignment" not in h for t in plain["translations"] for h in t["hypotheses"])


def test_models_of_two_directions_are_refused(monkeypatch):
    directions = {"a.pt": ("zh", "en"), "b.pt": ("en", "zh")}

    def load(paths, *args, **kwargs):
        src, tgt = directions[str(paths)]
        return type("Loaded", (), {"src_lang": src, "tgt_lang": tgt})()

    monkeypatch.setattr(Translator, "load", staticmethod(load))
    options = tool_config("serve", ["models={a: a.pt, b: b.pt}"], ServeOptions)
    with pytest.raises(ConfigError, match=r"^models.b translates en->zh, but models.a zh->en"):
        options.load_models()
