"""Guided alignment: eflomal's cached unit links, each batch's guide rows over its own pieces,
and the loss term that pulls the attention towards them."""

import shutil

import numpy as np
import pytest
import torch

from attnmt.data.dataset import ParallelData
from attnmt.data.guide import ALIGNMENT_FILE, AlignmentGuide, build_alignments
from attnmt.data.sampling import SampledData
from attnmt.data.tokenizer import load_sentencepiece
from attnmt.data.units import piece_to_unit, read_links, unit_spans, units
from attnmt.errors import DataError
from attnmt.infer.align import piece_spans
from attnmt.infer.translate import Translator
from attnmt.train.loss import TokenLoss, alignment_cross_entropy
from attnmt.vocab import EOS_ID, PAD_ID
from tests.train.test_trainer import losses, make_trainer


def toy_folder(tmp_path, links):
    (tmp_path / "train.zh").write_text("我爱你。\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("I love you.\n", encoding="utf-8")
    (tmp_path / ALIGNMENT_FILE).write_text(links + "\n", encoding="utf-8")
    return tmp_path


def test_guide_rows_spread_each_target_piece_over_the_source_pieces_its_links_reach(tmp_path):
    # zh units 我 爱 你 。; en units I love you . ; 爱-love and 你-love both, 。-. left out
    guide = AlignmentGuide(toy_folder(tmp_path, "0-0 1-1 2-1 2-2"), "zh", "en")
    # byte spans: zh pieces 我爱 | 你 | 。 ; en pieces I | " lo" | ve | " you" | .
    guide.pieces = [
        [np.array([(0, 6), (6, 9), (9, 12)])],
        [np.array([(0, 1), (1, 4), (4, 6), (6, 10), (10, 11)])],
    ]
    expected = [
        [1.0, 0.0, 0.0],  # I -> 我 (piece 0)
        [0.5, 0.5, 0.0],  # " lo" -> love -> 爱 (piece 0) and 你 (piece 1)
        [0.5, 0.5, 0.0],  # ve: the same unit
        [0.0, 1.0, 0.0],  # you -> 你
        [0.0, 0.0, 0.0],  # . : no link, not guided
    ]
    np.testing.assert_allclose(guide.rows(0), expected)
    batch = guide.batch(np.array([0]), target_steps=7, source_steps=5).numpy()
    assert batch.shape == (1, 7, 5)
    np.testing.assert_allclose(batch[0, :5, :3], expected)
    assert not batch[0, 5:].any() and not batch[0, :, 3:].any()  # EOS and padding: zero


def test_a_link_past_its_sentence_names_the_file_and_line(tmp_path):
    with pytest.raises(DataError, match=rf"{ALIGNMENT_FILE}, line 1: 4-0 is past"):
        AlignmentGuide(toy_folder(tmp_path, "0-0 4-0"), "zh", "en")


@pytest.fixture
def prepared_copy(trained_run, tmp_path):
    """The tiny run's processed folder, copied: the cache is written into it."""
    folder = tmp_path / "data"
    shutil.copytree(Translator.load(trained_run / "best.pt").dataset_folder, folder)
    models = {lang: load_sentencepiece(folder / f"spm.{lang}.model") for lang in ("zh", "en")}
    return folder, models


def test_the_cache_is_a_line_of_links_per_training_pair_built_once(prepared_copy):
    folder, _ = prepared_copy
    path = build_alignments(folder, "zh", "en")
    sources = (folder / "train.zh").read_text(encoding="utf-8").splitlines()
    targets = (folder / "train.en").read_text(encoding="utf-8").splitlines()
    counts = [[len(units(s, "zh")) for s in sources], [len(units(t, "en")) for t in targets]]
    pairs = read_links(path, *counts)  # refuses an index past its sentence
    assert len(pairs) == len(sources) and sum(len(p.sure) for p in pairs) > len(sources)
    stamp = path.stat().st_mtime_ns
    assert build_alignments(folder, "zh", "en") == path and path.stat().st_mtime_ns == stamp


def check_guides(data):
    batches = [data.batch(b) for b in data.token_batches(512, 1, 0)]
    guided = total = 0
    for batch in batches:
        assert batch.guide.shape == (*batch.target.shape, batch.source.shape[1])
        sums = batch.guide.sum(-1)
        assert torch.all((sums - 1).abs().lt(1e-5) | sums.eq(0))
        real = batch.target.ne(PAD_ID) & batch.target.ne(EOS_ID)
        assert not sums[~real].any()
        eos = batch.source_lengths - 1
        assert not batch.guide[torch.arange(len(eos)), :, eos].any()  # no weight on EOS
        guided, total = guided + int(sums.gt(0).sum()), total + int(real.sum())
    assert guided > 0.8 * total  # eflomal links most target pieces


def test_guide_rows_match_the_links_over_character_spans(prepared_copy):
    # the same rows from character offsets (`piece_spans`), the links read here: the guide's
    # byte offsets, its unit indices and its orientation (i source, j target) agree
    folder, models = prepared_copy
    path = build_alignments(folder, "zh", "en")
    guide = AlignmentGuide(folder, "zh", "en")
    ids = guide.encode(models)
    lines = path.read_text(encoding="utf-8").splitlines()
    checked = 0
    for k in range(0, len(lines), 7):
        sides = []
        for side, lang in enumerate(("zh", "en")):
            text = guide.texts[side][k]
            found, spans = piece_spans(models[lang], text)
            assert found == ids[side][k]
            sides.append(piece_to_unit(spans, unit_spans(text, lang)))
        links = np.zeros((sides[1].shape[1], sides[0].shape[1]), dtype=np.float32)
        for word in lines[k].split():
            i, j = map(int, word.split("-"))
            links[j, i] = 1.0
        reach = sides[1] @ links @ sides[0].T
        total = reach.sum(1, keepdims=True)
        expected = np.divide(reach, total, out=np.zeros_like(reach), where=total > 0)
        np.testing.assert_allclose(guide.rows(k), expected, atol=1e-6)
        checked += int((total > 0).sum())
    assert checked > 100


def test_fixed_and_sampled_segmentations_get_guides_of_their_own_pieces(prepared_copy):
    folder, models = prepared_copy
    build_alignments(folder, "zh", "en")
    fixed = ParallelData(folder, "train", "zh", "en")
    fixed.follow(AlignmentGuide(folder, "zh", "en"), models)
    check_guides(fixed)
    sampled = SampledData(folder, "train", models, "zh", "en", 0.1, -1, 7)
    sampled.follow(AlignmentGuide(folder, "zh", "en"), models)
    check_guides(sampled)


def test_the_alignment_term_is_its_formula():
    weights = torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]])
    guide = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]])
    by_hand = -(np.log(0.7) + 0.5 * np.log(0.3) + 0.5 * np.log(0.6))
    assert alignment_cross_entropy(weights, guide).item() == pytest.approx(by_hand, rel=1e-6)
    zero = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])  # a padded row, a zero weight
    assert torch.isfinite(alignment_cross_entropy(zero, torch.zeros_like(zero)))


def test_training_adds_w_times_the_term_and_runs(tiny_corpus, tmp_path):
    trainer = make_trainer(
        tiny_corpus, tmp_path, "run", "trainer.guided_alignment=0.5", "trainer.max_steps=3"
    )
    batch = trainer.train_data.batch(trainer.train_data.token_batches(512, 1, 0)[0])
    assert batch.guide is not None
    model = trainer.model.eval()  # no dropout: the same forward pass twice
    with torch.no_grad():
        guided, tokens = TokenLoss(model, 0.0, 0.5)(batch)
        plain, _ = TokenLoss(model, 0.0)(batch)
        _, weights = model(batch.source, batch.source_lengths, batch.previous)
    term = sum(
        -float(g) * np.log(max(float(a), 1e-9))
        for g, a in zip(batch.guide.flatten(), weights.flatten(), strict=True)
        if g > 0
    )
    assert tokens == batch.target_tokens
    assert guided.item() - plain.item() == pytest.approx(0.5 * term, rel=1e-4)
    model.train()  # the term alone moves the attention's parameters
    _, weights = model(batch.source, batch.source_lengths, batch.previous)
    alignment_cross_entropy(weights, batch.guide).backward()
    moved = [p.grad for p in model.decoder.attention.parameters() if p.grad is not None]
    assert moved and any(g.abs().sum() > 0 for g in moved)
    model.zero_grad(set_to_none=True)
    trainer.fit()
    found = losses(tmp_path / "run")
    assert [step for step, _ in found] == [1, 2, 3] and all(np.isfinite(x) for _, x in found)
