"""Ensembles: several models decoding as one, through the API and the tools."""

import hashlib
import subprocess
import sysconfig
from pathlib import Path

import pytest

from attnmt.data.tokenizer import train_sentencepiece
from attnmt.errors import CheckpointError
from attnmt.infer import checkpoint as ckpt
from attnmt.infer.checkpoint import RunDir
from attnmt.infer.ensemble import Ensemble
from attnmt.infer.translate import Translator

SENTENCES = ["我很好。", "你好！", "", "他走了。", "我们明天去公园。"]


def results(translator, **search):
    return [
        [(h.text, round(h.score, 4), h.target_pieces) for h in t.hypotheses]
        for t in translator.translate(SENTENCES, **search)
    ]


def one_model_ensemble(translator):
    return Translator(
        Ensemble([translator.model]),
        translator.source_sp,
        translator.target_sp,
        translator.config,
        translator.device,
    )


@pytest.mark.parametrize("search", [{"beam_size": 1}, {"beam_size": 4, "n_best": 3}])
def test_an_ensemble_of_one_model_translates_as_that_model(trained_run, search):
    single = Translator.load(trained_run / "best.pt")
    alone = one_model_ensemble(single)
    assert results(alone, **search) == results(single, **search)
    sources, targets = SENTENCES, ["I'm fine.", "Hello!", "", "He left.", "We go."]
    pairs = zip(alone.score(sources, targets), single.score(sources, targets), strict=True)
    for mine, theirs in pairs:
        assert mine.token_log_probs == pytest.approx(theirs.token_log_probs, abs=1e-5)


def test_an_ensemble_of_two_models_averages_their_log_probabilities(trained_run):
    paths = [trained_run / "best.pt", RunDir(trained_run).kept_files()[0]]
    ensemble = Translator.load(paths)
    members = [Translator.load(p) for p in paths]
    assert isinstance(ensemble.model, Ensemble) and len(ensemble.model.members) == 2
    pair = (["他走了。"], ["He left."])
    expected = [
        sum(scores) / 2
        for scores in zip(*(m.score(*pair)[0].token_log_probs for m in members), strict=True)
    ]
    assert ensemble.score(*pair)[0].token_log_probs == pytest.approx(expected, abs=1e-5)
    found = ensemble.translate(SENTENCES, beam_size=3, attention=True)
    assert [bool(t.hypotheses) for t in found] == [bool(s) for s in SENTENCES]
    first = found[0].hypotheses[0]
    assert first.attention.shape == (len(first.target_pieces), len(found[0].source_pieces))


def test_attnmt_translate_takes_a_list_of_checkpoints(trained_run, tmp_path):
    paths = [trained_run / "best.pt", RunDir(trained_run).kept_files()[0]]
    script = str(Path(sysconfig.get_path("scripts")) / "attnmt-translate")
    result = subprocess.run(
        [script, f"ckpt=[{paths[0]},{paths[1]}]", "beam_size=3"],
        input="\n".join(SENTENCES) + "\n",
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    expected = [t.text for t in Translator.load(paths).translate(SENTENCES, beam_size=3)]
    assert result.stdout.splitlines() == expected


def test_models_with_different_vocabularies_cannot_form_an_ensemble(
    trained_run, tiny_corpus, tmp_path
):
    english = [line.split("\t")[0] for line in tiny_corpus.read_text("utf-8").splitlines()]
    other_sp = tmp_path / "other.model"
    saved = ckpt.load_checkpoint(trained_run / "best.pt")
    size = Translator.load(trained_run / "best.pt").target_sp.get_piece_size()
    train_sentencepiece(english, len(english), other_sp, size, "bpe", 1.0, 10**6, "size")
    data = other_sp.read_bytes()
    saved["tokenizers"]["en"] = {**saved["tokenizers"]["en"], "model": data}
    saved["tokenizers"]["en"]["sha256"] = hashlib.sha256(data).hexdigest()
    ckpt.save_checkpoint(saved, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"other.pt: its en SentencePiece model differs"):
        Translator.load([trained_run / "best.pt", tmp_path / "other.pt"])
