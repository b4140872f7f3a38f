"""Soft attention and its scorers.

At each target step the decoder state q (the query) is scored against every encoder state h_i
of H = [h_1..h_n] (the keys) by a scorer s(h_i, q); a softmax over the real, unpadded positions
gives the weights, and the context is their weighted sum of the keys:

    a_i = exp(s(h_i, q)) / sum_j exp(s(h_j, q))        (j over real positions only)
    context = sum_i a_i h_i

`attend` computes those two lines for every scorer. A scorer is a subclass of `Attention` that
overrides `score`; what does not depend on the query (W h for additive) goes in `prepare_keys`,
which the decoder calls once per sentence and passes to every step. A scorer with heads
(multihead) also says what the weights average (`values`) and how its heads become one
context (`merge_heads`); `forward` is the same for all.

Two additions apply on top of the scorers:

- a window (`window=local_p`, any scorer; Luong et al., 2015): each query predicts where in the
  sentence to look, p; only the positions within `window_size` of it are softmaxed over, and
  their weights are multiplied by a Gaussian centred on p (`LocalWindow`);
- coverage (`CoverageAttention`; Tu et al., 2016): the additive scorer also reads how much
  attention each position has had so far, which the decoder carries from step to step.

A sentence may have several queries at once: beam search's K hypotheses of one sentence all
attend over the same keys. The keys are then kept once per sentence (B of them) and the
queries come K per sentence, consecutive (B*K rows); scorers see them grouped as (B, G, Dq),
G = 1 outside beam search.

Adding a scorer: write a subclass here with its formula in the docstring, and a yaml file
`configs/attention/NAME.yaml` with `_target_: attnmt.model.attention.YourClass` and its options.
`attention=NAME` then selects it on any command line.

Shapes: B batch (sentences), G queries per sentence, S source length, Dq query width, Dk key
width, A attention width, H heads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnmt import options
from attnmt.config import in_range
from attnmt.errors import ConfigError


def attend(
    scores: Tensor, mask: Tensor, values: Tensor, focus: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The softmax over real positions and the weighted sum, shared by every scorer.

    scores (..., G, S) of G queries, mask broadcastable to scores, True at real tokens (and,
    with a window, inside it); values (..., S, D). `focus`, broadcastable to scores, multiplies
    the weights after the softmax (local-p's Gaussian). Returns context (..., G, D) and weights
    (..., G, S), exactly 0 where the mask is False.
    """
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # a_i
    if focus is not None:
        # Not renormalised, as in Luong et al.: a row then sums to less than 1.
        weights = weights * focus
    # In values' type: local-p's fp32 focus makes bf16 weights (dtype=bfloat16) fp32.
    context = weights.to(values.dtype) @ values  # sum_i a_i h_i, for each query
    return context, weights


def group_queries(query: Tensor, keys: Tensor) -> Tensor:
    """Query rows (B*G, Dq) as (B, G, Dq): the G consecutive queries of each of the B sentences
    whose keys (B, S, *) they attend over."""
    return query.view(keys.size(0), -1, query.size(-1))


def along_scores(x: Tensor, scores: Tensor) -> Tensor:
    """x (B, ..., S) with a 1 inserted after B for each dimension scores (B, [H,] G, S) has
    more (a scorer's heads, the queries), so it broadcasts against them."""
    return x.view(x.size(0), *[1] * (scores.dim() - x.dim()), *x.shape[1:])


WINDOWS = ("local_p",)  # attention.window: null, or one of these


class LocalWindow(nn.Module):
    """Luong et al.'s local-p window: where each query looks, predicted from the query.

    p = S sigmoid(v_p^T tanh(W_p q))          S the sentence's real length (EOS included)
    only positions i with |i - p| <= D take part in the softmax, and their weights are then
    multiplied by exp(-(i - p)^2 / (2 sigma^2)), sigma = D / 2, D = `size`.

    Positions count from 0, so p in [0, S] reaches half a position beyond either end; the
    window always holds a real position, since some i lies within 1 <= D of any such p.
    """

    def __init__(self, query_dim: int, size: int) -> None:
        super().__init__()
        self.size = size
        self.W_p = nn.Linear(query_dim, query_dim, bias=False)
        self.v_p = nn.Linear(query_dim, 1, bias=False)

    def forward(self, query: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, G, Dq), mask (B, S) -> which positions lie in each query's window (B, G, S)
        and the Gaussian that multiplies their weights (B, G, S)."""
        length = mask.sum(-1).view(-1, 1, 1).float()  # S: (B, 1, 1)
        where = torch.sigmoid(self.v_p(torch.tanh(self.W_p(query))).float())  # (B, G, 1)
        position = length * where  # p = S sigmoid(v_p^T tanh(W_p q))
        source = torch.arange(mask.size(-1), device=mask.device, dtype=torch.float)  # i: (S,)
        distance = source - position  # i - p: (B, G, S)
        sigma = self.size / 2
        in_window = distance.abs() <= self.size
        return in_window, torch.exp(-distance.square() / (2 * sigma**2))


class Attention(nn.Module):
    """Soft attention with a scorer s(h, q); subclasses define `score`, and set
    `equal_widths` when the score needs queries and keys of one width (h^T q), and
    `reads_coverage` when it reads the coverage (then `score` takes it as a third argument).

    `window` and `window_size` are every scorer's: `window="local_p"` limits each query to
    `LocalWindow`'s positions around its predicted p, D = `window_size`.
    """

    equal_widths = False
    reads_coverage = False

    def __init__(
        self, query_dim: int, key_dim: int, window: str | None = None, window_size: int = 4
    ) -> None:
        super().__init__()
        if self.equal_widths and query_dim != key_dim:
            raise ConfigError(
                f"{type(self).__name__} scores h^T q, so the query width (query_dim={query_dim}) "
                f"must equal the key width (key_dim={key_dim}); in a model both are "
                "decoder.hidden_size, since the encoder's states are projected to it"
            )
        if window is not None and window not in WINDOWS:
            raise ConfigError(
                f"attention.window={window!r}: valid values are null, {', '.join(WINDOWS)}"
            )
        # The default suits the Tatoeba corpus, half its sources 10 pieces or fewer: a window
        # of 2D + 1 = 9 positions, about Luong et al.'s 21 for their longer WMT sentences.
        in_range("attention.window_size", window_size, 1, None)
        self.query_dim = query_dim
        self.key_dim = key_dim
        self.window = LocalWindow(query_dim, window_size) if window == "local_p" else None

    def prepare_keys(self, keys: Tensor) -> Tensor:
        """The query-independent part of the score, computed once per sentence.

        keys (B, S, Dk) -> (B, S, *); by default the keys themselves.
        """
        return keys

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """s(h_i, q) for every i and every query of a sentence: query (B, G, Dq), keys as
        `prepare_keys` returns them -> (B, G, S)."""
        raise NotImplementedError

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        mask: Tensor,
        prepared_keys: Tensor | None = None,
        coverage: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """context (B*G, Dk), weights (B*G, S) for query (B*G, Dq), keys (B, S, Dk), mask (B, S):
        G consecutive queries per sentence (G = 1: one each).

        Pass `prepared_keys` (from `prepare_keys(keys)`) to reuse it across decoding steps, and
        to a scorer that `reads_coverage`, each query's `coverage` (B*G, S).
        """
        if prepared_keys is None:
            prepared_keys = self.prepare_keys(keys)
        query = group_queries(query, keys)  # (B, G, Dq)
        read = () if coverage is None else (group_queries(coverage, keys),)  # (B, G, S)
        scores = self.score(query, prepared_keys, *read)  # (B, [H,] G, S)
        focus = None
        if self.window is not None:
            in_window, focus = self.window(query, mask)  # (B, G, S) each
            mask = mask.unsqueeze(1) & in_window  # (B, G, S): real and inside the window
            focus = along_scores(focus, scores)
        mask = along_scores(mask, scores)
        context, weights = attend(scores, mask, self.values(keys, prepared_keys), focus)
        context, weights = self.merge_heads(context, weights)  # (B, G, Dk), (B, G, S)
        return context.flatten(0, 1), weights.flatten(0, 1)

    def values(self, keys: Tensor, prepared_keys: Tensor) -> Tensor:
        """What the weights average: the keys h_i themselves, unless a scorer with heads
        projects them (B, [H,] S, *)."""
        return keys

    def merge_heads(self, context: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
        """One context and one weight row per query, from a scorer's heads; without heads,
        what `attend` gave."""
        return context, weights


class AdditiveAttention(Attention):
    """Additive (Bahdanau) attention: s(h, q) = v^T tanh(W h + U q)."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, **window: object) -> None:
        super().__init__(query_dim, key_dim, **window)
        in_range("attention.attn_dim", attn_dim, 1, 4096)
        self.W = nn.Linear(key_dim, attn_dim, bias=False)
        self.U = nn.Linear(query_dim, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        return self.W(keys)  # W h: (B, S, A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        energy = torch.tanh(keys.unsqueeze(1) + self.U(query).unsqueeze(2))
        return self.v(energy).squeeze(-1)  # (B, G, S, A) -> (B, G, S)


class CoverageAttention(AdditiveAttention):
    """Additive attention that sees what was attended before (Tu et al., 2016):
    s(h_i, q, c_i) = v^T tanh(W h_i + U q + V c_i), c_i = sum_{t' < t} a_{t', i} the coverage,
    the weight position i got at the query's earlier steps.

    The decoder carries c in its state (`DecoderState.coverage`) and adds each step's weights.
    """

    reads_coverage = True

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, **window: object) -> None:
        super().__init__(query_dim, key_dim, attn_dim, **window)
        self.V = nn.Linear(1, attn_dim, bias=False)

    def score(self, query: Tensor, keys: Tensor, coverage: Tensor | None = None) -> Tensor:
        """As `Attention.score`, with coverage (B, G, S); without it, none yet (zeros)."""
        if coverage is None:
            coverage = keys.new_zeros(query.size(0), query.size(1), keys.size(1))
        energy = (
            keys.unsqueeze(1)  # W h_i: (B, 1, S, A)
            + self.U(query).unsqueeze(2)  # U q: (B, G, 1, A)
            # c is summed in fp32; V may hold bf16 weights (dtype=bfloat16)
            + self.V(coverage.unsqueeze(-1).to(self.V.weight.dtype))  # V c_i
        )
        return self.v(torch.tanh(energy)).squeeze(-1)  # (B, G, S)


class DotAttention(Attention):
    """Dot-product (Luong) attention: s(h, q) = h^T q."""

    equal_widths = True

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return query @ keys.transpose(1, 2)  # (B, G, D) @ (B, D, S) -> (B, G, S)


class ScaledDotAttention(DotAttention):
    """Scaled dot-product attention: s(h, q) = h^T q / sqrt(D)."""

    @property
    def divisor(self) -> float:
        """sqrt(D), what h^T q is divided by."""
        return math.sqrt(self.key_dim)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return super().score(query, keys) / self.divisor


class BilinearAttention(Attention):
    """Bilinear ("general") attention: s(h, q) = h^T W q."""

    def __init__(self, query_dim: int, key_dim: int, **window: object) -> None:
        super().__init__(query_dim, key_dim, **window)
        self.W = nn.Linear(query_dim, key_dim, bias=False)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.W(query) @ keys.transpose(1, 2)  # h^T (W q): (B, G, S)


class MultiHeadAttention(Attention):
    """Scaled dot attention over H heads with learned projections.

    head_k: s_k(h, q) = (K_k h)^T (Q_k q) / sqrt(A/H), context_k = sum_i a_ki (V_k h_i);
    context = O [context_1; ...; context_H]. The weights returned are the heads' mean.
    """

    def __init__(
        self, query_dim: int, key_dim: int, attn_dim: int, heads: int, **window: object
    ) -> None:
        super().__init__(query_dim, key_dim, **window)
        in_range("attention.attn_dim", attn_dim, 1, 4096)
        in_range("attention.heads", heads, 1, attn_dim)
        if attn_dim % heads:
            raise ConfigError(
                f"attention.attn_dim={attn_dim} must be a multiple of attention.heads={heads}"
            )
        self.heads = heads
        self.Q = nn.Linear(query_dim, attn_dim, bias=False)
        self.KV = nn.Linear(key_dim, 2 * attn_dim, bias=False)  # K and V in one product
        self.O = nn.Linear(attn_dim, key_dim, bias=False)

    def _split_heads(self, x: Tensor) -> Tensor:
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, n, A) -> (B, H, n, A/H)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        return self.KV(keys)  # [K h; V h]: (B, S, 2A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        projected_keys = self._split_heads(keys.chunk(2, dim=-1)[0])  # (B, H, S, A/H)
        projected_query = self._split_heads(self.Q(query))  # (B, H, G, A/H)
        scores = projected_query @ projected_keys.transpose(-1, -2)  # (B, H, G, S)
        return scores / math.sqrt(projected_query.shape[-1])

    def values(self, keys: Tensor, prepared_keys: Tensor) -> Tensor:
        return self._split_heads(prepared_keys.chunk(2, dim=-1)[1])  # V h: (B, H, S, A/H)

    def merge_heads(self, context: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
        # context (B, H, G, A/H) -> O [head_1; ...; head_H]: (B, G, Dk); weights: their mean
        return self.O(context.transpose(1, 2).flatten(2)), weights.mean(dim=1)


def build_attention(name: str, query_dim: int, key_dim: int, **options_: object) -> Attention:
    """The scorer `configs/attention/{name}.yaml` describes, with `options_` over its defaults."""
    config = {**options.option_config("attention", name), **options_}
    return options.build(config, "attention", query_dim=query_dim, key_dim=key_dim)
