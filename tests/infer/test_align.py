"""Word alignments from attention: units, pieces to units, hard links, AER, symmetrisation,
the gold set, and the tools that write links."""

import shutil
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from attnmt.data.units import (
    GoldPair,
    grow_diag_final_and,
    piece_to_unit,
    read_links,
    unit_spans,
    units,
)
from attnmt.errors import ConfigError, DataError
from attnmt.infer.align import (
    Side,
    aer,
    decoded_spans,
    flip,
    format_links,
    hard_links,
    piece_links,
    read_pairs,
    unit_attention,
)
from attnmt.infer.evaluate import GoldSet, alignment_error
from attnmt.infer.translate import Translator

GOLD = Path(__file__).resolve().parents[2] / "data" / "alignments"
SCRIPTS = Path(sysconfig.get_path("scripts"))


def test_chinese_units_are_characters_and_latin_runs():
    assert units("我有3个iPhone 12。", "zh") == ["我", "有", "3", "个", "iPhone", "12", "。"]
    assert unit_spans("他 跑", "zh") == [(0, 1), (2, 3)]  # spaces are not units


def test_english_units_are_13a_words_with_their_spans():
    text = "I don't know, Tom."
    assert units(text, "en") == ["I", "don't", "know", ",", "Tom", "."]
    assert unit_spans(text, "en")[2:4] == [(8, 12), (12, 13)]


def test_a_piece_maps_to_every_unit_it_covers_and_a_lone_space_to_the_next():
    # "ab cd": units ab (0-2), cd (3-5); pieces "ab c" (0-4) covers both, " " alone none
    spans = [(0, 2), (3, 5)]
    matrix = piece_to_unit([(0, 4), (4, 5)], spans)
    assert matrix.tolist() == [[1, 1], [0, 1]]
    assert piece_to_unit([(2, 3)], spans).tolist() == [[0, 1]]  # the space before cd


def test_an_empty_hypothesis_has_no_spans(trained_run):
    translator = Translator.load(trained_run / "best.pt")
    assert decoded_spans(translator.target_sp, []) == ("", [])
    assert Side.decoded(translator.target_sp, [], "en").piece_units.shape[0] == 0


def test_unit_attention_sums_source_pieces_and_averages_target_pieces():
    # 3 target pieces (+EOS) x 3 source pieces (+EOS); target units: pieces {0, 1}, {2};
    # source units: piece 0 -> unit 0, piece 1 -> units 0 and 1, piece 2 -> unit 1
    weights = np.array(
        [[0.5, 0.2, 0.2, 0.1], [0.1, 0.6, 0.2, 0.1], [0.0, 0.1, 0.8, 0.1], [0.3, 0.3, 0.3, 0.1]]
    )
    source = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32)
    target = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    by_unit = unit_attention(weights, source, target)
    expected = [[(0.7 + 0.7) / 2, (0.4 + 0.8) / 2], [0.1, 0.9]]  # by hand
    assert np.allclose(by_unit, expected)
    assert hard_links(by_unit) == [(0, 0), (1, 1)]
    assert hard_links(by_unit, threshold=0.6) == [(0, 0), (1, 0), (1, 1)]
    assert hard_links(np.zeros((1, 2))) == []  # a unit that gets no weight stays unlinked


def test_piece_links_mark_every_piece_pair_that_covers_a_linked_unit_pair():
    # source units: piece 0 -> unit 0, piece 1 -> units 0 and 1, piece 2 -> unit 1;
    # target units: pieces 0 and 1 -> unit 0, piece 2 -> unit 1, piece 3 -> unit 2
    source = Side("", np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32))
    target = Side("", np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32))
    links = [(0, 0), (1, 2)]  # (source unit, target unit)
    assert piece_links(links, source, target) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 3), (2, 3)]
    assert piece_links([], source, target) == []


def test_aer_on_a_worked_example():
    # A = {0-0, 1-1, 2-1}; S = {0-0, 1-1}; P = S + {2-2}
    # |A n S| = 2, |A n P| = 2, |A| = 3, |S| = 2: AER = 1 - 4 / 5 = 0.2
    gold = [GoldPair({(0, 0), (1, 1)}, {(0, 0), (1, 1), (2, 2)})]
    found = aer([[(0, 0), (1, 1), (2, 1)]], gold)
    assert found.aer == pytest.approx(0.2) and found.low == found.high == pytest.approx(0.2)
    assert (found.precision, found.recall) == (pytest.approx(2 / 3), 1.0)


def test_aer_sums_counts_over_the_set_not_sentence_means():
    gold = [
        GoldPair({(0, 0)}, {(0, 0)}),
        GoldPair({(i, i) for i in range(9)}, {(i, i) for i in range(9)}),
    ]
    predicted = [[(0, 1)], [(i, i) for i in range(9)]]
    # summed: 1 - (0 + 9 + 0 + 9) / (1 + 9 + 1 + 9) = 0.1; the mean of the pairs' would be 0.5
    found = aer(predicted, gold)
    assert found.aer == pytest.approx(0.1)
    assert found.low <= 0.1 <= found.high


def test_grow_diag_final_and_by_hand():
    forward = {(0, 0), (1, 1), (2, 2)}
    backward = {(0, 0), (1, 1), (1, 2), (3, 3)}
    # intersection 0-0, 1-1; grow: 1-2 beside 1-1 (target 2 free), then 2-2 diagonal to
    # 1-1 (source 2 free), then 3-3 diagonal to 2-2
    assert grow_diag_final_and(forward, backward) == [(0, 0), (1, 1), (1, 2), (2, 2), (3, 3)]
    # final-and: 2-3, far from the rest, joins (both words unaligned); 0-2 does not (0 is)
    assert grow_diag_final_and({(0, 0), (0, 2)}, {(0, 0), (2, 3)}) == [(0, 0), (2, 3)]


def test_pharaoh_round_trip_and_flip(tmp_path):
    assert format_links([(1, 0), (0, 0)], [(2, 1)]) == "0-0 1-0 2p1"
    assert flip([(0, 1), (2, 0)]) == [(0, 2), (1, 0)]
    path = tmp_path / "a.gold"
    path.write_text("0-0 1p1\n\n", encoding="utf-8")
    first, second = read_links(path, [2, 1], [2, 1])
    assert first.sure == {(0, 0)} and first.possible == {(0, 0), (1, 1)}
    assert second.sure == second.possible == set()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0-0 1-x\n0-0\n", r"a.gold, line 1: '1-x' is not i-j or ipj"),
        ("0-0\n0-3\n", r"a.gold, line 2: 0-3 is past the sentence pair's 1 source and 2 target"),
        ("0-0\n", r"a.gold: 1 lines, but 2 sentence pairs"),
    ],
)
def test_a_bad_alignment_file_is_refused_naming_file_and_line(tmp_path, text, message):
    path = tmp_path / "a.gold"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_links(path, [2, 1], [2, 2])


def test_bad_pairs_files_are_refused_naming_file_and_line(tmp_path):
    source, target = tmp_path / "s.txt", tmp_path / "t.txt"
    source.write_text("我很好。\n你好！\n", encoding="utf-8")
    target.write_text("I'm fine.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"s.txt has 2 lines but .*t.txt has 1"):
        read_pairs(source, target)
    target.write_text("I'm fine.\n\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"t.txt, line 2: an empty line"):
        read_pairs(source, target)


def test_the_gold_set_reads_and_holds_200_pairs():
    gold = GoldSet.read(GOLD)
    assert (gold.src_lang, gold.tgt_lang, len(gold.pairs)) == ("zh", "en", 200)
    assert all(p.sure <= p.possible for p in gold.pairs) and sum(len(p.sure) for p in gold.pairs)
    attribution = (GOLD / "tatoeba-test.attribution.tsv").read_text(encoding="utf-8").splitlines()
    assert len(attribution) == 201 and all("tatoeba.org #" in row for row in attribution[1:])


class FakeTranslator:
    """Aligns every pair as source unit 0 - target unit 1, in its own direction."""

    def __init__(self, src_lang, tgt_lang):
        self.src_lang, self.tgt_lang = src_lang, tgt_lang

    def align(self, sources, targets, threshold=None, batch_tokens=4096):
        return [[(0, 1)] for _ in sources]


def test_an_en_zh_models_links_are_flipped_before_scoring():
    gold = GoldSet("g", "zh", "en", ["我很好。"], ["I'm fine ."], [GoldPair({(1, 0)}, {(1, 0)})])
    assert alignment_error(FakeTranslator("en", "zh"), gold).aer == 0.0  # 0-1 flipped: 1-0
    assert alignment_error(FakeTranslator("zh", "en"), gold).aer == 1.0
    with pytest.raises(ConfigError, match="the model translates de->en"):
        alignment_error(FakeTranslator("de", "en"), gold)


@pytest.fixture(scope="module")
def alone(trained_run, tmp_path_factory) -> Path:
    """The tiny model's best.pt copied alone to a folder of its own."""
    folder = tmp_path_factory.mktemp("alone")
    shutil.copy(trained_run / "best.pt", folder / "model.pt")
    return folder / "model.pt"


def test_translator_align_gives_one_link_per_target_unit_within_the_sentences(alone):
    translator = Translator.load(alone)
    sources, targets = ["我很好。", "你好！"], ["I'm fine.", "Hello!"]
    found = translator.align(sources, targets)
    for source, target, links in zip(sources, targets, found, strict=True):
        n_source, n_target = len(units(source, "zh")), len(units(target, "en"))
        assert sorted(j for _, j in links) == list(range(n_target))  # argmax: one each
        assert all(0 <= i < n_source for i, _ in links)


def test_translator_piece_links_are_its_unit_links_over_the_pieces_it_shows(alone):
    translator = Translator.load(alone)
    text = "我们明天去公园。"
    (translation,) = translator.translate([text], beam_size=3, n_best=2, attention=True)
    units_found = translator.links(text, translation)
    pieces_found = translator.piece_links(text, translation)
    assert len(pieces_found) == len(translation.hypotheses) == 2
    for hypothesis, unit_links, links in zip(
        translation.hypotheses, units_found, pieces_found, strict=True
    ):
        target = [p for p in hypothesis.target_pieces if p != "</s>"]
        assert links and all(0 <= s < len(translation.source_pieces) - 1 for s, _ in links)
        assert {t for _, t in links} <= set(range(len(target)))  # never the EOS row
        assert len(links) >= len(unit_links)  # each unit link covers at least one cell


def test_attnmt_align_writes_pharaoh_lines_and_scores_the_gold_set(alone, tmp_path):
    source, target = tmp_path / "s.zh", tmp_path / "t.en"
    source.write_text("我很好。\n你好！\n", encoding="utf-8")
    target.write_text("I'm fine.\nHello!\n", encoding="utf-8")
    run = [str(SCRIPTS / "attnmt-align"), f"ckpt={alone}", "device=cpu"]
    result = subprocess.run([*run, f"source={source}", f"target={target}"], capture_output=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    expected = Translator.load(alone).align(["我很好。", "你好！"], ["I'm fine.", "Hello!"])
    assert lines == [format_links(links) for links in expected]
    scored = subprocess.run([*run, f"gold={GOLD}"], capture_output=True)
    assert scored.returncode == 0, scored.stderr
    assert scored.stdout.decode().startswith("tatoeba-test: AER ")
    uneven = tmp_path / "u.en"
    uneven.write_text("I'm fine.\n", encoding="utf-8")
    refused = subprocess.run([*run, f"source={source}", f"target={uneven}"], capture_output=True)
    assert refused.returncode == 2 and b"s.zh has 2 lines but" in refused.stderr


def test_attnmt_translate_alignment_hard_appends_links(alone):
    command = [str(SCRIPTS / "attnmt-translate"), f"ckpt={alone}", "device=cpu"]
    result = subprocess.run(
        [*command, "alignment=hard", "beam_size=2"],
        input="我很好。\n\n".encode(),
        capture_output=True,
    )
    assert result.returncode == 0, result.stderr
    first, empty = result.stdout.decode().splitlines()
    text, links = first.split(" ||| ")
    plain = subprocess.run(
        [*command, "beam_size=2"], input="我很好。\n".encode(), capture_output=True
    )
    assert text == plain.stdout.decode().strip()  # the translation is the same
    pairs = [tuple(map(int, link.split("-"))) for link in links.split()]
    assert sorted(j for _, j in pairs) == list(range(len(units(text, "en"))))
    assert all(0 <= i < len(units("我很好。", "zh")) for i, _ in pairs)
    assert empty == " ||| "


def test_a_character_s_byte_pieces_all_map_to_its_unit(byte_fallback_run):
    translator = Translator.load(byte_fallback_run / "best.pt")
    text = "我喜欢龘。"
    ids, source = Side.encoded(translator.source_sp, text, "zh")
    pieces = [translator.source_sp.id_to_piece(i) for i in ids]
    dragon = units(text, "zh").index("龘")
    at = [k for k, piece in enumerate(pieces) if piece.startswith("<0x")]
    assert len(at) == 3 and all(source.piece_units[k].argmax() == dragon for k in at)
    assert source.piece_units[at].sum() == 3  # each byte piece covers that unit alone
    decoded = Side.decoded(translator.source_sp, ids, "zh")  # the same pieces as an output
    assert decoded.text == text and np.array_equal(decoded.piece_units, source.piece_units)
