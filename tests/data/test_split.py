import numpy as np
import pytest

from attnmt.data import corpus
from attnmt.data.split import DEV, SPLITS, TEST, TRAIN, assign_splits, group_pairs
from attnmt.errors import DataError


def _keys(sentences):
    return np.array([corpus.sentence_key(s) for s in sentences], dtype=np.uint64)


def test_pairs_sharing_a_sentence_share_a_group():
    en = ["I see.", "Go.", "I see.", "I understand.", "Run.", "Hi."]
    zh = ["我明白了。", "走。", "我懂了。", "我懂了。", "跑。", "走。"]
    assert group_pairs(_keys(en), _keys(zh)).tolist() == [0, 1, 0, 0, 4, 1]


def test_long_chains_join_into_one_group():
    # pair i shares its English with pair i+1 (odd i) or its Chinese (even i): one chain
    n = 101
    en = [f"e{(i + 1) // 2}" for i in range(n)]
    zh = [f"z{i // 2}" for i in range(n)]
    assert set(group_pairs(_keys(en), _keys(zh)).tolist()) == {0}


def _staged_real(path, folder):
    report = corpus.CleaningReport()
    staged = corpus.stage_pairs([corpus.read_tatoeba(path)], folder, report)
    keep = np.flatnonzero(staged.first_occurrences())
    kept = set(keep.tolist())
    pairs = [p for i, p in enumerate(staged.lines()) if i in kept]
    return pairs, group_pairs(staged.en_keys[keep], staged.zh_keys[keep])


def test_split_of_real_corpus_leaks_no_sentence(shared_corpus, tmp_path):
    pairs, groups = _staged_real(shared_corpus, tmp_path)
    codes = assign_splits(groups, dev_size=1000, test_size=1000, seed=1)
    assert (int((codes == DEV).sum()), int((codes == TEST).sum())) == (1000, 1000)
    for side in (0, 1):
        seen = {
            name: {p[side] for p, c in zip(pairs, codes.tolist(), strict=True) if c == code}
            for code, name in enumerate(SPLITS)
        }
        assert not seen["train"] & seen["dev"]
        assert not seen["train"] & seen["test"]
        assert not seen["dev"] & seen["test"]


def test_split_is_deterministic_for_a_seed(small_corpus, tmp_path):
    _, groups = _staged_real(small_corpus, tmp_path)
    first = assign_splits(groups, 50, 50, seed=7)
    assert (first == assign_splits(groups, 50, 50, seed=7)).all()
    assert (first != assign_splits(groups, 50, 50, seed=8)).any()
    assert int((first == TRAIN).sum()) == len(groups) - 100


def test_split_sizes_that_leave_no_training_data_are_an_error(small_corpus, tmp_path):
    _, groups = _staged_real(small_corpus, tmp_path)
    with pytest.raises(DataError, match="data.dev_size"):
        assign_splits(groups, len(groups), 1, seed=0)
