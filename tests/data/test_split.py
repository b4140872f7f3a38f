import pytest

from attnmt.data import corpus
from attnmt.data.split import group_pairs, split_pairs


def test_pairs_sharing_a_sentence_share_a_group():
    pairs = [
        corpus.Pair("I see.", "我明白了。"),
        corpus.Pair("Go.", "走。"),
        corpus.Pair("I see.", "我懂了。"),
        corpus.Pair("I understand.", "我懂了。"),
    ]
    assert group_pairs(pairs) == [[0, 2, 3], [1]]


def _real_pairs(path):
    return corpus.clean(corpus.read_tatoeba(path), corpus.CleaningReport())


def test_split_of_real_corpus_leaks_no_sentence(shared_corpus):
    splits = split_pairs(_real_pairs(shared_corpus), dev_size=1000, test_size=1000, seed=1)
    assert (len(splits.dev), len(splits.test)) == (1000, 1000)
    for lang in ("en", "zh"):
        seen = {name: {p.side(lang) for p in pairs} for name, pairs in splits.items()}
        assert not seen["train"] & seen["dev"]
        assert not seen["train"] & seen["test"]
        assert not seen["dev"] & seen["test"]


def test_split_is_deterministic_for_a_seed(small_corpus):
    pairs = _real_pairs(small_corpus)
    first = split_pairs(pairs, 50, 50, seed=7)
    assert first == split_pairs(pairs, 50, 50, seed=7)
    assert first.test != split_pairs(pairs, 50, 50, seed=8).test


def test_split_sizes_that_leave_no_training_data_are_an_error(small_corpus):
    from attnmt.errors import DataError

    pairs = _real_pairs(small_corpus)
    with pytest.raises(DataError, match="data.dev_size"):
        split_pairs(pairs, len(pairs), 1, seed=0)
