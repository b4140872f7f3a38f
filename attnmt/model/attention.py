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


def attend(scores: Tensor, mask: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """The softmax over real positions and the weighted sum, shared by every scorer.

    scores (..., G, S) of G queries, mask broadcastable to scores, True at real tokens;
    values (..., S, D). Returns context (..., G, D) and weights (..., G, S), exactly 0 at padding.
    """
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # a_i
    context = weights @ values  # sum_i a_i h_i, for each query
    return context, weights


def group_queries(query: Tensor, keys: Tensor) -> Tensor:
    """Query rows (B*G, Dq) as (B, G, Dq): the G consecutive queries of each of the B sentences
    whose keys (B, S, *) they attend over."""
    return query.view(keys.size(0), -1, query.size(-1))


class Attention(nn.Module):
    """Soft attention with a scorer s(h, q); subclasses define `score`, and set
    `equal_widths` when the score needs queries and keys of one width (h^T q)."""

    equal_widths = False

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        if self.equal_widths and query_dim != key_dim:
            raise ConfigError(
                f"{type(self).__name__} scores h^T q, so the query width (query_dim={query_dim}) "
                f"must equal the key width (key_dim={key_dim}); in a model both are "
                "decoder.hidden_size, since the encoder's states are projected to it"
            )
        self.query_dim = query_dim
        self.key_dim = key_dim

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
        self, query: Tensor, keys: Tensor, mask: Tensor, prepared_keys: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """context (B*G, Dk), weights (B*G, S) for query (B*G, Dq), keys (B, S, Dk), mask (B, S):
        G consecutive queries per sentence (G = 1: one each).

        Pass `prepared_keys` (from `prepare_keys(keys)`) to reuse it across decoding steps.
        """
        if prepared_keys is None:
            prepared_keys = self.prepare_keys(keys)
        scores = self.score(group_queries(query, keys), prepared_keys)  # (B, [H,] G, S)
        mask = mask.view(mask.size(0), *[1] * (scores.dim() - 2), mask.size(1))
        context, weights = attend(scores, mask, self.values(keys, prepared_keys))
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

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        in_range("attention.attn_dim", attn_dim, 1, 4096)
        self.W = nn.Linear(key_dim, attn_dim, bias=False)
        self.U = nn.Linear(query_dim, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        return self.W(keys)  # W h: (B, S, A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        energy = torch.tanh(keys.unsqueeze(1) + self.U(query).unsqueeze(2))  # (B, G, S, A)
        return self.v(energy).squeeze(-1)  # (B, G, S)


class DotAttention(Attention):
    """Dot-product (Luong) attention: s(h, q) = h^T q."""

    equal_widths = True

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return query @ keys.transpose(1, 2)  # (B, G, D) @ (B, D, S) -> (B, G, S)


class ScaledDotAttention(DotAttention):
    """Scaled dot-product attention: s(h, q) = h^T q / sqrt(D)."""

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return super().score(query, keys) / math.sqrt(self.key_dim)


class BilinearAttention(Attention):
    """Bilinear ("general") attention: s(h, q) = h^T W q."""

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.W = nn.Linear(query_dim, key_dim, bias=False)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.W(query) @ keys.transpose(1, 2)  # h^T (W q): (B, G, S)


class MultiHeadAttention(Attention):
    """Scaled dot attention over H heads with learned projections.

    head_k: s_k(h, q) = (K_k h)^T (Q_k q) / sqrt(A/H), context_k = sum_i a_ki (V_k h_i);
    context = O [context_1; ...; context_H]. The weights returned are the heads' mean.
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, heads: int) -> None:
        super().__init__(query_dim, key_dim)
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
