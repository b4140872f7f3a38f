"""Each scorer against numbers worked out by hand, masking, and the precomputed path."""

import math

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.model.attention import build_attention
from attnmt.options import option_names

E = math.e


def _set(linear, rows):
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(rows, dtype=torch.float))


def _run(attn, query, keys, mask=None):
    query, keys = torch.tensor([query], dtype=torch.float), torch.tensor([keys], dtype=torch.float)
    mask = torch.ones(keys.shape[:2], dtype=torch.bool) if mask is None else torch.tensor([mask])
    return attn(query, keys, mask)


def test_dot_by_hand():
    # q = [1, 0]; h = [1,0], [0,1], [1,1] -> s = 1, 0, 1 -> a = e, 1, e over (2e + 1)
    context, weights = _run(build_attention("dot", 2, 2), [1, 0], [[1, 0], [0, 1], [1, 1]])
    a = [E / (2 * E + 1), 1 / (2 * E + 1), E / (2 * E + 1)]
    assert weights[0].tolist() == pytest.approx(a, abs=1e-6)
    assert context[0].tolist() == pytest.approx([a[0] + a[2], a[1] + a[2]], abs=1e-6)


def test_scaled_dot_by_hand():
    # q = [2, 0]; h = [1, 0], [0, 1] -> s = 2/sqrt(2), 0 -> a_1 = 1 / (1 + e^-sqrt(2))
    _, weights = _run(build_attention("scaled_dot", 2, 2), [2, 0], [[1, 0], [0, 1]])
    a1 = 1 / (1 + math.exp(-math.sqrt(2)))
    assert weights[0].tolist() == pytest.approx([a1, 1 - a1], abs=1e-6)


def test_additive_by_hand():
    # W = U = I, v = [1, 1]; q = [1, 0]; h1 = [0, 0] -> tanh(1) + tanh(0) = 0.761594
    # h2 = [1, 1] -> tanh(2) + tanh(1) = 1.725622; h3 padding
    attn = build_attention("additive", 2, 2, attn_dim=2)
    _set(attn.W, [[1, 0], [0, 1]])
    _set(attn.U, [[1, 0], [0, 1]])
    _set(attn.v, [[1, 1]])
    context, weights = _run(attn, [1, 0], [[0, 0], [1, 1], [5, 5]], [True, True, False])
    a2 = 1 / (1 + math.exp(0.761594 - 1.725622))
    assert weights[0].tolist() == pytest.approx([1 - a2, a2, 0.0], abs=1e-6)
    assert weights[0, 2].item() == 0.0
    assert context[0].tolist() == pytest.approx([a2, a2], abs=1e-6)


def test_bilinear_by_hand():
    # W q = [[2, 0], [0, 1]] [1, 1] = [2, 1]; h1 = [1, 0] -> 2, h2 = [0, 1] -> 1
    attn = build_attention("bilinear", 2, 2)
    _set(attn.W, [[2, 0], [0, 1]])
    _, weights = _run(attn, [1, 1], [[1, 0], [0, 1]])
    assert weights[0].tolist() == pytest.approx([E / (E + 1), 1 / (E + 1)], abs=1e-6)


def test_multihead_by_hand():
    # 2 heads of width 1, Q = K = V = O = identity; q = [1, 2]; h1 = [1, 0], h2 = [0, 1]
    # head 1: s = 1, 0 -> a = e/(e+1), 1/(e+1); its value is h[0] -> context e/(e+1)
    # head 2: s = 0, 2 -> a = 1/(1+e^2), e^2/(1+e^2); value h[1] -> context e^2/(1+e^2)
    attn = build_attention("multihead", 2, 2, attn_dim=2, heads=2)
    _set(attn.Q, [[1, 0], [0, 1]])
    _set(attn.KV, [[1, 0], [0, 1], [1, 0], [0, 1]])
    _set(attn.O, [[1, 0], [0, 1]])
    context, weights = _run(attn, [1, 2], [[1, 0], [0, 1]])
    head1, head2 = E / (E + 1), E**2 / (1 + E**2)
    assert context[0].tolist() == pytest.approx([head1, head2], abs=1e-6)
    mean = [(head1 + 1 - head2) / 2, (1 - head1 + head2) / 2]
    assert weights[0].tolist() == pytest.approx(mean, abs=1e-6)


SCORERS = option_names("attention")  # every configs/attention/*.yaml, a new scorer included


def test_the_scorer_list_comes_from_the_configs():
    assert {"additive", "dot", "scaled_dot", "bilinear", "multihead"} <= set(SCORERS)


def _sizes(name):
    """Unequal query and key widths (5, 7), unless the scorer needs them equal."""
    return (5, 5) if build_attention(name, 5, 5).equal_widths else (5, 7)


@pytest.mark.parametrize("window", [None, "local_p"])
@pytest.mark.parametrize("name", SCORERS)
def test_masking_and_padding_do_not_change_results(name, window):
    torch.manual_seed(0)
    query_dim, key_dim = _sizes(name)
    attn = build_attention(name, query_dim, key_dim, window=window)
    query, keys = torch.randn(3, query_dim), torch.randn(3, 4, key_dim)
    lengths = torch.tensor([4, 2, 1])
    mask = torch.arange(4) < lengths.unsqueeze(1)
    context, weights = attn(query, keys, mask)
    assert weights.shape == (3, 4) and context.shape == (3, key_dim)
    assert torch.all(weights[~mask] == 0)
    if window is None:
        assert torch.allclose(weights.sum(-1), torch.ones(3))
    else:  # the Gaussian's weights are not renormalised
        assert torch.all((weights.sum(-1) > 0) & (weights.sum(-1) <= 1))
    for i, n in enumerate(lengths.tolist()):
        alone, alone_weights = attn(query[i : i + 1], keys[i : i + 1, :n], mask[i : i + 1, :n])
        assert torch.allclose(context[i], alone[0], atol=1e-5)
        assert torch.allclose(weights[i, :n], alone_weights[0], atol=1e-5)


@pytest.mark.parametrize("name", SCORERS)
def test_precomputed_keys_equal_the_per_step_path(name):
    torch.manual_seed(1)
    query_dim, key_dim = _sizes(name)
    attn = build_attention(name, query_dim, key_dim)
    keys, mask = torch.randn(2, 3, key_dim), torch.ones(2, 3, dtype=torch.bool)
    prepared = attn.prepare_keys(keys)
    for _ in range(3):  # several decoding steps reuse one preparation
        query = torch.randn(2, query_dim)
        fast, _ = attn(query, keys, mask, prepared)
        naive, _ = attn(query, keys, mask)
        assert torch.allclose(fast, naive, atol=1e-6)


def test_additive_matches_the_formula_term_by_term():
    torch.manual_seed(2)
    attn = build_attention("additive", 5, 7, attn_dim=3)
    query, keys = torch.randn(1, 5), torch.randn(1, 4, 7)
    _, weights = attn(query, keys, torch.ones(1, 4, dtype=torch.bool))
    scores = [attn.v(torch.tanh(attn.W(keys[0, i]) + attn.U(query[0]))).item() for i in range(4)]
    assert weights[0].tolist() == pytest.approx(torch.tensor(scores).softmax(0).tolist())


def test_parameters_carry_the_formulas_names_without_bias():
    additive = build_attention("additive", 5, 7, attn_dim=3)
    shapes = {name: tuple(p.shape) for name, p in additive.named_parameters()}
    assert shapes == {"W.weight": (3, 7), "U.weight": (3, 5), "v.weight": (1, 3)}
    bilinear = build_attention("bilinear", 5, 7)
    assert {n: tuple(p.shape) for n, p in bilinear.named_parameters()} == {"W.weight": (7, 5)}


def test_dot_with_unequal_widths_names_sizes_and_keys():
    with pytest.raises(ConfigError, match=r"query_dim=5.*key_dim=7.*decoder.hidden_size"):
        build_attention("dot", 5, 7)
    with pytest.raises(ConfigError, match=r"ScaledDotAttention"):
        build_attention("scaled_dot", 5, 7)


def test_unknown_scorer_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=", ".join(option_names("attention"))):
        build_attention("no-such-scorer", 5, 5)


def test_multihead_width_must_split_into_heads():
    with pytest.raises(ConfigError, match=r"attention.attn_dim=7.*attention.heads=2"):
        build_attention("multihead", 5, 5, attn_dim=7, heads=2)


@pytest.mark.parametrize("name", SCORERS)
def test_queries_grouped_per_sentence_equal_keys_repeated_per_query(name):
    torch.manual_seed(2)
    query_dim, key_dim = _sizes(name)
    attn = build_attention(name, query_dim, key_dim)
    keys, query = torch.randn(2, 4, key_dim), torch.randn(2 * 3, query_dim)  # 3 per sentence
    mask = torch.arange(4) < torch.tensor([[4], [2]])
    grouped, grouped_weights = attn(query, keys, mask)
    repeated = keys.repeat_interleave(3, dim=0), mask.repeat_interleave(3, dim=0)
    expected, expected_weights = attn(query, *repeated)
    assert grouped.shape == (6, key_dim) and grouped_weights.shape == (6, 4)
    assert torch.allclose(grouped, expected, atol=1e-6)
    assert torch.allclose(grouped_weights, expected_weights, atol=1e-6)


def test_the_window_keys_are_every_scorers():
    for name in SCORERS:
        query_dim, key_dim = _sizes(name)
        plain = build_attention(name, query_dim, key_dim, window=None)
        local = build_attention(name, query_dim, key_dim, window="local_p", window_size=3)
        assert plain.window is None and local.window.size == 3
    with pytest.raises(ConfigError, match=r"attention.window='local_m': valid values are null"):
        build_attention("dot", 5, 5, window="local_m")
    with pytest.raises(ConfigError, match=r"attention.window_size=0: must be at least 1"):
        build_attention("dot", 5, 5, window="local_p", window_size=0)


def test_local_p_by_hand():
    # v_p = 0: sigmoid(0) = 1/2, so p = S/2: 2.5 for the first sentence (5 real of 7), 1.5 for
    # the second (3 real). D = 2 (sigma 1): positions 1-4 for the first; 0-3 for the second,
    # of which 3 is padding. Inside the window: softmax there, times exp(-(i - p)^2 / 2).
    torch.manual_seed(3)
    attn = build_attention("bilinear", 5, 3, window="local_p", window_size=2)
    with torch.no_grad():
        attn.window.v_p.weight.zero_()
    query, keys = torch.randn(2, 5), torch.randn(2, 7, 3)
    mask = torch.arange(7) < torch.tensor([[5], [3]])
    context, weights = attn(query, keys, mask)
    scores = attn.score(query.unsqueeze(1), keys).squeeze(1)  # (2, 7)
    for row, (p, window) in enumerate([(2.5, [1, 2, 3, 4]), (1.5, [0, 1, 2])]):
        inside = scores[row, window].softmax(0)
        gaussian = torch.exp(-((torch.tensor(window) - p) ** 2) / 2)
        expected = torch.zeros(7)
        expected[window] = inside * gaussian
        assert weights[row].tolist() == pytest.approx(expected.tolist(), abs=1e-6)
        assert context[row].tolist() == pytest.approx((expected @ keys[row]).tolist(), abs=1e-5)
    outside = [[0, 5, 6], [3, 4, 5, 6]]  # beyond D of p, or padding: exactly 0
    assert all(weights[row, outside[row]].eq(0).all() for row in range(2))


@pytest.mark.parametrize("name", SCORERS)
def test_every_scorer_keeps_to_its_local_p_window(name):
    torch.manual_seed(4)
    query_dim, key_dim = _sizes(name)
    attn = build_attention(name, query_dim, key_dim, window="local_p", window_size=1)
    query, keys = torch.randn(6, query_dim), torch.randn(2, 7, key_dim)  # 3 queries a sentence
    mask = torch.arange(7) < torch.tensor([[7], [5]])
    _, weights = attn(query, keys, mask)
    grouped = query.view(2, 3, query_dim)
    in_window, _ = attn.window(grouped, mask)  # (2, 3, 7)
    allowed = (in_window & mask.unsqueeze(1)).flatten(0, 1)
    assert torch.all(weights[~allowed] == 0) and torch.all(weights[allowed] > 0)
    assert torch.all(allowed.sum(-1) <= 3)  # 2D + 1 positions at most
    position = mask.sum(-1, keepdim=True) * torch.sigmoid(
        attn.window.v_p(torch.tanh(attn.window.W_p(grouped)))
    ).squeeze(-1)  # p = S sigmoid(v_p^T tanh(W_p q)): (2, 3)
    distance = (torch.arange(7) - position.unsqueeze(-1)).abs()
    assert torch.equal(in_window, distance <= 1)


def test_coverage_matches_the_formula_term_by_term():
    torch.manual_seed(5)
    attn = build_attention("coverage", 5, 7, attn_dim=3)
    query, keys = torch.randn(1, 5), torch.randn(1, 4, 7)
    coverage = torch.tensor([[0.9, 0.1, 1.7, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    _, weights = attn(query, keys, mask, coverage=coverage)
    scores = [
        attn.v(
            torch.tanh(attn.W(keys[0, i]) + attn.U(query[0]) + attn.V(coverage[0, i : i + 1]))
        ).item()
        for i in range(3)
    ]  # v^T tanh(W h_i + U q + V c_i)
    assert weights[0, :3].tolist() == pytest.approx(torch.tensor(scores).softmax(0).tolist())
    assert weights[0, 3].item() == 0.0
    _, fresh = attn(query, keys, mask)  # no coverage given: none yet
    _, zero = attn(query, keys, mask, coverage=torch.zeros(1, 4))
    assert torch.equal(fresh, zero) and not torch.allclose(fresh, weights)
