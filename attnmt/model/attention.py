"""Soft attention and its scorers.

At each target step the decoder state q (the query) is scored against every encoder state h_i
of H = [h_1..h_n] (the keys) by a scorer s(h_i, q); a softmax over the real, unpadded positions
gives the weights, and the context is their weighted sum of the keys:

    a_i = exp(s(h_i, q)) / sum_j exp(s(h_j, q))        (j over real positions only)
    context = sum_i a_i h_i

`attend` computes those two lines for every scorer. A scorer is a subclass of `Attention` that
overrides `score`; what does not depend on the query (W h for additive) goes in `prepare_keys`,
which the decoder calls once per sentence and passes to every step.

Adding a scorer: write a subclass here with its formula in the docstring, and a yaml file
`configs/attention/NAME.yaml` with `_target_: attnmt.model.attention.YourClass` and its options.
`attention=NAME` then selects it on any command line.

Shapes: B batch, S source length, Dq query width, Dk key width, A attention width, H heads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnmt import options
from attnmt.errors import ConfigError


def attend(scores: Tensor, mask: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """The softmax over real positions and the weighted sum, shared by every scorer.

    scores (..., S), mask (B, S) or broadcastable to scores, True at real tokens;
    values (..., S, D). Returns context (..., D) and weights (..., S), exactly 0 at padding.
    """
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # a_i
    context = (weights.unsqueeze(-2) @ values).squeeze(-2)  # sum_i a_i h_i
    return context, weights


class Attention(nn.Module):
    """Soft attention with a scorer s(h, q); subclasses define `score`."""

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim

    def prepare_keys(self, keys: Tensor) -> Tensor:
        """The query-independent part of the score, computed once per sentence.

        keys (B, S, Dk) -> (B, S, *); by default the keys themselves.
        """
        return keys

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """s(h_i, q) for every i: query (B, Dq), keys as `prepare_keys` returns them -> (B, S)."""
        raise NotImplementedError

    def forward(
        self, query: Tensor, keys: Tensor, mask: Tensor, prepared_keys: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """context (B, Dk), weights (B, S) for query (B, Dq), keys (B, S, Dk), mask (B, S).

        Pass `prepared_keys` (from `prepare_keys(keys)`) to reuse it across decoding steps.
        """
        if prepared_keys is None:
            prepared_keys = self.prepare_keys(keys)
        return attend(self.score(query, prepared_keys), mask, keys)


class AdditiveAttention(Attention):
    """Additive (Bahdanau) attention: s(h, q) = v^T tanh(W h + U q)."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.W = nn.Linear(key_dim, attn_dim, bias=False)
        self.U = nn.Linear(query_dim, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        return self.W(keys)  # W h: (B, S, A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        energy = torch.tanh(keys + self.U(query).unsqueeze(1))  # (B, S, A)
        return self.v(energy).squeeze(-1)  # (B, S)


def _require_equal_widths(name: str, query_dim: int, key_dim: int) -> None:
    if query_dim != key_dim:
        raise ConfigError(
            f"{name} attention scores h^T q, so the query width (query_dim={query_dim}, set by "
            f"decoder.hidden_size) must equal the key width (key_dim={key_dim}, set by "
            f"encoder.hidden_size, doubled when encoder.bidirectional)"
        )


class DotAttention(Attention):
    """Dot-product (Luong) attention: s(h, q) = h^T q."""

    option = "dot"  # the config option, named when the widths differ

    def __init__(self, query_dim: int, key_dim: int) -> None:
        _require_equal_widths(self.option, query_dim, key_dim)
        super().__init__(query_dim, key_dim)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return (keys @ query.unsqueeze(-1)).squeeze(-1)  # (B, S, D) @ (B, D, 1) -> (B, S)


class ScaledDotAttention(DotAttention):
    """Scaled dot-product attention: s(h, q) = h^T q / sqrt(D)."""

    option = "scaled_dot"

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return super().score(query, keys) / math.sqrt(self.key_dim)


class BilinearAttention(Attention):
    """Bilinear ("general") attention: s(h, q) = h^T W q."""

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.W = nn.Linear(query_dim, key_dim, bias=False)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return (keys @ self.W(query).unsqueeze(-1)).squeeze(-1)  # h^T (W q): (B, S)


class MultiHeadAttention(Attention):
    """Scaled dot attention over H heads with learned projections.

    head_k: s_k(h, q) = (K_k h)^T (Q_k q) / sqrt(A/H), context_k = sum_i a_ki (V_k h_i);
    context = O [context_1; ...; context_H]. The weights returned are the heads' mean.
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, heads: int) -> None:
        super().__init__(query_dim, key_dim)
        if attn_dim % heads:
            raise ConfigError(
                f"attention.attn_dim={attn_dim} must be a multiple of attention.heads={heads}"
            )
        self.heads = heads
        self.Q = nn.Linear(query_dim, attn_dim, bias=False)
        self.KV = nn.Linear(key_dim, 2 * attn_dim, bias=False)  # K and V in one product
        self.O = nn.Linear(attn_dim, key_dim, bias=False)

    def _split_heads(self, x: Tensor) -> Tensor:
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, S, A) -> (B, H, S, A/H)

    def prepare_keys(self, keys: Tensor) -> Tensor:
        return self.KV(keys)  # [K h; V h]: (B, S, 2A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        projected_keys = self._split_heads(keys.chunk(2, dim=-1)[0])  # (B, H, S, A/H)
        projected_query = self.Q(query).unflatten(-1, (self.heads, -1))  # (B, H, A/H)
        scores = (projected_keys @ projected_query.unsqueeze(-1)).squeeze(-1)  # (B, H, S)
        return scores / math.sqrt(projected_query.shape[-1])

    def forward(
        self, query: Tensor, keys: Tensor, mask: Tensor, prepared_keys: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        if prepared_keys is None:
            prepared_keys = self.prepare_keys(keys)
        values = self._split_heads(prepared_keys.chunk(2, dim=-1)[1])  # (B, H, S, A/H)
        scores = self.score(query, prepared_keys)
        head_contexts, weights = attend(scores, mask.unsqueeze(1), values)  # (B, H, A/H)
        return self.O(head_contexts.flatten(1)), weights.mean(dim=1)


def build_attention(name: str, query_dim: int, key_dim: int, **options_: object) -> Attention:
    """The scorer `configs/attention/{name}.yaml` describes, with `options_` over its defaults."""
    config = {**options.option_config("attention", name), **options_}
    return options.build(config, "attention", query_dim=query_dim, key_dim=key_dim)
