"""Token batches: within budget, every pair once per epoch, reproducible, little padding."""

import numpy as np

from attnmt.config import to_dataclass
from attnmt.data.config import DataConfig
from attnmt.data.dataset import ParallelData, chunk_by_tokens, pad
from attnmt.data.prepare import prepare_dataset
from attnmt.vocab import BOS_ID, EOS_ID, PAD_ID
from tests.conftest import compose_config, plain, small_data_overrides


def test_chunks_respect_the_budget_and_keep_the_order():
    sizes = np.array([3, 5, 7, 2, 9, 40])
    order = np.argsort(sizes, kind="stable")
    batches = chunk_by_tokens(order, sizes, batch_tokens=15)
    assert np.concatenate(batches).tolist() == order.tolist()
    for batch in batches:
        assert len(batch) == 1 or len(batch) * sizes[batch].max() <= 15
    assert batches[-1].tolist() == [5]  # longer than the budget: a batch of its own


def test_epoch_batches_cover_every_pair_once_reproducibly(small_corpus, tmp_path):
    cfg = plain(compose_config("prepare", small_data_overrides(small_corpus, tmp_path)).data)
    folder, _, _ = prepare_dataset(to_dataclass(DataConfig, cfg, "data"))
    data = ParallelData(folder, "train", "zh", "en")
    first = data.token_batches(256, seed=3, epoch=0)
    assert sorted(np.concatenate(first).tolist()) == list(range(len(data)))
    again = data.token_batches(256, seed=3, epoch=0)
    assert [b.tolist() for b in first] == [b.tolist() for b in again]
    other = data.token_batches(256, seed=3, epoch=1)
    assert [b.tolist() for b in first] != [b.tolist() for b in other]
    batch = data.batch(first[0])
    assert batch.source.numel() <= 256 or len(first[0]) == 1
    assert (batch.previous[:, 0] == BOS_ID).all()
    lengths = (batch.target != PAD_ID).sum(1)
    assert (batch.target[range(len(lengths)), lengths - 1] == EOS_ID).all()
    assert lengths.tolist() == sorted(lengths.tolist(), reverse=True)


def test_pad_places_each_sentence_with_its_bos_and_eos():
    sentences = [np.array([5, 6, 7], dtype=np.uint16), np.array([], dtype=np.uint16), np.array([9])]
    assert pad(sentences, 2, 3).tolist() == [[2, 5, 6, 7, 3], [2, 3, 0, 0, 0], [2, 9, 3, 0, 0]]
    assert pad(sentences, None, 3).tolist() == [[5, 6, 7, 3], [3, 0, 0, 0], [9, 3, 0, 0]]
    assert pad(sentences, 2, None).tolist() == [[2, 5, 6, 7], [2, 0, 0, 0], [2, 9, 0, 0]]


def test_an_epoch_goes_by_target_length_then_source_length_by_turns(small_corpus, tmp_path):
    cfg = plain(compose_config("prepare", small_data_overrides(small_corpus, tmp_path)).data)
    folder, _, _ = prepare_dataset(to_dataclass(DataConfig, cfg, "data"))
    data = ParallelData(folder, "train", "zh", "en")
    turns = 0
    for batch in data.token_batches(256, seed=3, epoch=0):  # each a run of the sorted order
        target, source = data.target.lengths[batch] + 1, data.source.lengths[batch] + 1
        assert (np.diff(target) >= 0).all()
        for length in np.unique(target):
            steps = np.diff(source[target == length])
            assert (steps >= 0).all() if length % 2 == 0 else (steps <= 0).all()
            turns += length % 2 == 1 and (steps < 0).any()
    assert turns  # some odd target length held sources of several lengths, falling
