"""data.corpora: several corpora with weights (one gives dev and test), the CC-CEDICT reader,
a lexicon ranked by word frequency, and the errors that name the key."""

import gzip
import json

import numpy as np
import pytest

from attnmt.config import to_dataclass
from attnmt.data import corpus
from attnmt.data.config import DataConfig
from attnmt.data.dataset import ParallelData
from attnmt.data.prepare import prepare_dataset
from attnmt.data.sources import CedictLexicon, frequency_file, kept_entries, word_frequencies
from attnmt.errors import ConfigError, DataError
from tests.conftest import FIXTURE_CORPUS, compose_config, plain, tiny_train_overrides
from tests.train.test_trainer import losses, make_trainer

TATOEBA = "attnmt.data.sources.TatoebaCorpus"
CEDICT = """\
# CC-CEDICT
# a comment
一點點 一点点 [yi1 dian3 dian3] /a little bit/
丁 丁 [Ding1] /surname Ding/
一鼻孔出氣 一鼻孔出气 [yi1 bi2 kong3] /lit. to breathe through one nostril (idiom)/to sing along/
去世 去世 [qu4 shi4] /(formal) to pass away/euphemism for 死[si3]/
了 了 [le5] /see 了[liao3]/CL:個|个[ge4]/
"""


def write_lines(path, lines):
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def two_corpora(tmp_path_factory):
    """A: 400 pairs of the fixture corpus; B: 300 others, plus 50 of A's (which may land in
    A's dev or test split, and must then leave B)."""
    root = tmp_path_factory.mktemp("corpora")
    lines = FIXTURE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)
    a = write_lines(root / "a.txt", lines[:400])
    b = write_lines(root / "b.txt", lines[400:700] + lines[:50])
    return root, a, b


def data_overrides(root, a, b, weights=(1.0, 0.5)):
    corpora = (
        f"[{{source: {TATOEBA}, raw_path: '{a}', weight: {weights[0]}, evaluate: true}},"
        f"{{source: {TATOEBA}, raw_path: '{b}', weight: {weights[1]}}}]"
    )
    # two corpora hold more distinct characters than the tiny vocabulary has room for
    return [
        *tiny_train_overrides(a, root / "data"),
        "data.vocab.src_size=560",
        f"data.corpora={corpora}",
    ]


def data_config(overrides):
    return to_dataclass(DataConfig, plain(compose_config("train", overrides))["data"], "data")


def test_one_corpus_keeps_the_folder_and_settings_of_before():
    cfg = data_config(["data.raw_path=../shared/data/tatoeba-cmn-eng/cmn.txt"])
    assert cfg.corpora is None and "corpora" not in cfg.settings()
    assert cfg.folder.name == "tatoeba.zh-en.b468bbe0"  # the name this config had before corpora


def test_two_corpora_split_the_evaluated_one_and_follow_the_weights(two_corpora):
    root, a, b = two_corpora
    cfg = data_config(data_overrides(root, a, b))
    folder, manifest, _ = prepare_dataset(cfg)
    corpora = manifest["corpora"]
    assert [c["weight"] for c in corpora] == [1.0, 0.5] and corpora[0]["evaluate"]
    a_pairs = {
        (corpus.normalize(en, "en"), corpus.normalize(zh, "zh"))
        for en, zh in corpus.read_tatoeba(a)
    }
    for split in ("dev", "test"):  # only the evaluated corpus gives dev and test
        en = (folder / f"{split}.en").read_text(encoding="utf-8").splitlines()
        zh = (folder / f"{split}.zh").read_text(encoding="utf-8").splitlines()
        assert set(zip(en, zh, strict=True)) <= a_pairs
    assert manifest["dropped"]["dev_test_overlap"] > 0  # B's copies of A's dev/test pairs
    held = {
        line
        for split in ("dev", "test")
        for line in (folder / f"{split}.en").read_text(encoding="utf-8").splitlines()
    }
    data = ParallelData(folder, "train", "zh", "en")
    train_en = (folder / "train.en").read_text(encoding="utf-8").splitlines()
    assert not held & {train_en[i] for i in np.flatnonzero(data.mix.corpus == 1)}
    own = corpora[0]["train_pairs"]
    draws = []
    for epoch in (0, 1):
        pairs = np.concatenate(data.token_batches(512, 7, epoch))
        counts = np.bincount(data.mix.corpus[pairs], minlength=2)
        assert counts[0] == own and counts[1] == round(own * 0.5)  # the weights, in pairs
        assert abs(counts[1] / counts[0] - 0.5) < 0.02
        draws.append(sorted(pairs[data.mix.corpus[pairs] == 1].tolist()))
    assert draws[0] != draws[1]  # B is sampled afresh each epoch


def test_two_corpora_train(two_corpora, tmp_path):
    root, a, b = two_corpora
    *_, size, corpora = data_overrides(root, a, b)
    make_trainer(a, tmp_path, "run", size, corpora, "trainer.max_steps=3").fit()
    assert [step for step, _ in losses(tmp_path / "run")] == [1, 2, 3]


def test_the_cedict_reader_keeps_translations_not_notes(tmp_path):
    path = tmp_path / "cedict.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(CEDICT)
    assert list(corpus.read_cedict(path)) == [
        ("a little bit", "一点点"),
        ("to breathe through one nostril", "一鼻孔出气"),
        ("to sing along", "一鼻孔出气"),
        ("to pass away", "去世"),
    ]
    bad = write_lines(tmp_path / "bad.txt", ["not an entry\n"])
    with pytest.raises(Exception, match=r"bad.txt:1: not a CC-CEDICT entry"):
        list(corpus.read_cedict(bad))


def test_the_packaged_dictionary_is_found():
    cfg = data_config(["data=tatoeba_cedict", "data.raw_path=x.txt"])
    lexicon = cfg.corpus_list()[1]
    assert lexicon.data.raw_path is None  # not data.raw_path: another kind of source
    (path,) = CedictLexicon().input_files(lexicon.data)
    assert path.name == "cedict_1_0_ts_utf-8_mdbg.txt.gz" and path.stat().st_size > 1_000_000


@pytest.mark.parametrize(
    "corpora,message",
    [
        ("[{weight: -1, evaluate: true}]", r"data.corpora\[0\].weight=-1"),
        ("[{weight: 0, evaluate: true}, {weight: 0}]", r"data.corpora: every weight is 0"),
        ("[{weight: 0, evaluate: true}, {weight: 1}]", r"data.corpora\[0\].weight=0"),
        ("[{weight: 1}, {weight: 1}]", r"data.corpora: 0 corpora say evaluate: true"),
        (
            "[{weight: 1, evaluate: true}, {weight: 1, evaluate: true}]",
            r"data.corpora: 2 corpora say evaluate: true",
        ),
        ("[{weight: 1, evaluate: true, colour: red}]", r"data.corpora\[0\].colour: unknown key"),
        ("[{evaluate: true}]", r"data.corpora\[0\].weight is required"),
        ("[]", r"data.corpora=\[\]"),
        ("[{weight: abc, evaluate: true}]", r"data.corpora\[0\].weight="),
    ],
)
def test_bad_corpus_lists_name_the_key(corpora, message):
    with pytest.raises(ConfigError, match=message):
        data_config(["data.raw_path=x.txt", f"data.corpora={corpora}"])


def test_the_manifest_of_one_corpus_has_no_corpora(trained_run):
    from attnmt.infer.translate import Translator

    folder = Translator.load(trained_run / "best.pt").dataset_folder
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert "corpora" not in manifest and "dev_test_overlap" not in manifest["dropped"]
    assert not (folder / "train.corpus.npy").exists()


FREQUENCIES = "去世 30 v\n一点点 50 m\n的 900 uj\n一鼻孔出气 10 i\n"


def ranked_lexicon(tmp_path, top, frequencies=FREQUENCIES):
    cedict = write_lines(tmp_path / "cedict.txt", [CEDICT])
    counts = write_lines(tmp_path / "counts.txt", [frequencies])
    return (
        cedict,
        counts,
        f"{{source: {CEDICT_SOURCE}, raw_path: '{cedict}', frequency_list: '{counts}', "
        f"keep_top: {top}, weight: 1.0}}",
    )


CEDICT_SOURCE = "attnmt.data.sources.CedictLexicon"


def test_a_lexicon_keeps_its_most_common_headwords_first(tmp_path):
    cedict, counts, _ = ranked_lexicon(tmp_path, 2)
    # 的 is the most common word but no headword here; 丁 and 了 have no gloss kept
    assert kept_entries(cedict, counts, 2) == [
        ("a little bit", "一点点"),
        ("to pass away", "去世"),
    ]
    assert kept_entries(cedict, counts, 10)[-2:] == [
        ("to breathe through one nostril", "一鼻孔出气"),
        ("to sing along", "一鼻孔出气"),
    ]
    bad = write_lines(tmp_path / "bad.txt", ["去世 30\n一点点 many\n"])
    with pytest.raises(DataError, match=r"bad.txt:2: not a `word count` line"):
        kept_entries(cedict, bad, 2)


def test_wordfreq_ranks_common_words_first():
    common = word_frequencies(frequency_file("wordfreq"))
    assert common["的"] > common["我们"] > common["码头"] > common["充电器"]


def test_a_ranked_lexicon_is_the_training_pairs_of_its_kept_entries(two_corpora, tmp_path):
    root, a, b = two_corpora
    _, _, lexicon = ranked_lexicon(tmp_path, 2)
    *overrides, _, _ = data_overrides(root, a, b)  # the tiny vocabulary, not B's
    corpora = f"[{{source: {TATOEBA}, raw_path: '{a}', weight: 1.0, evaluate: true}}, {lexicon}]"
    cfg = data_config([*overrides, f"data.corpora={corpora}"])
    folder, manifest, _ = prepare_dataset(cfg)
    assert manifest["corpora"][1]["train_pairs"] == 2
    data = ParallelData(folder, "train", "zh", "en")
    zh = (folder / "train.zh").read_text(encoding="utf-8").splitlines()
    assert sorted(zh[i] for i in np.flatnonzero(data.mix.corpus == 1)) == ["一点点", "去世"]


@pytest.mark.parametrize(
    "entry,error,message",
    [
        (
            "keep_top: 5",
            ConfigError,
            r"data.corpora\[1\]: data.keep_top=5 needs data.frequency_list",
        ),
        (
            "frequency_list: wordfreq, keep_top: 0",
            ConfigError,
            r"data.corpora\[1\]: data.keep_top=0",
        ),
        (
            "frequency_list: missing.txt, keep_top: 5",
            DataError,
            r"data.corpora\[1\]: missing.txt: frequency list not found "
            r"\(set by data.frequency_list\)",
        ),
    ],
)
def test_bad_lexicon_keys_name_the_entry(tmp_path, entry, error, message):
    cedict = write_lines(tmp_path / "cedict.txt", [CEDICT])
    corpora = (
        f"[{{source: {TATOEBA}, weight: 1.0, evaluate: true}}, "
        f"{{source: {CEDICT_SOURCE}, raw_path: '{cedict}', {entry}, weight: 1.0}}]"
    )
    with pytest.raises(error, match=message):
        prepare_dataset(
            data_config(
                [f"data.raw_path={FIXTURE_CORPUS}", "data.sha256=null", f"data.corpora={corpora}"]
            )
        )


def test_only_a_lexicon_ranks_its_entries(tmp_path):
    corpora = (
        f"[{{source: {TATOEBA}, weight: 1.0, evaluate: true}}, "
        f"{{source: {TATOEBA}, frequency_list: wordfreq, keep_top: 5, weight: 1.0}}]"
    )
    cfg = data_config(
        [f"data.raw_path={FIXTURE_CORPUS}", "data.sha256=null", f"data.corpora={corpora}"]
    )
    with pytest.raises(ConfigError, match=r"data.corpora\[1\]: data.keep_top, data.frequency_list"):
        prepare_dataset(cfg)
