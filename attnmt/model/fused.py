"""The GRU loops of the default model with their backward passes written out: a speed seam.

On CPU, `BahdanauDecoder` with a one-layer GRU and a plain scorer of one query (additive, dot,
scaled dot or bilinear; the default model is additive) runs its teacher-forced loop as
`bahdanau_gru_loop`, and the encoder runs each GRU direction as `gru_layer`. They compute what
the step loops compute:

    context_t = attend(q_{t-1}, H)      s_i = v^T tanh(W h_i + U q_{t-1})  (additive), or
                                        s_i = h_i^T M q_{t-1} / d  (the products), masked softmax
    q_t = GRU([embedding(y_{t-1}); context_t], q_{t-1})
        r, z = sigmoid(gi_rz + gh_rz)    n = tanh(gi_n + r gh_n)    q_t = (1 - z) n + z q_{t-1}
        gi = x W_ih^T + b_ih, gh = q_{t-1} W_hh^T + b_hh          (`_gru_step`)

but each as one autograd node whose backward runs through time by hand. What that saves,
against autograd over the step loop (docs/benchmarks.md has the figures):

- the input's share of the GRU's products (the embedding's, in the decoder) is one product over
  all steps before the loop, and every weight's gradient one product over all steps after the
  backward loop, not a small product and a sum at every step;
- the weights are cast to the compute type once per call, not once per use at every step, and
  each step is the formulas' few operations, not autograd's bookkeeping around each;
- a step's products take the batch's rows padded with zero rows to a multiple of
  `blocks.ROW_MULTIPLE` (their copies in the compute type kept in buffers of that many rows),
  so oneDNN compiles their kernels once per run, not once per batch (`blocks`);
- in fp32, the GRU's gates and the scorer's e = tanh(W h + U q) with s = v^T e, forward and
  backward, each run as one pass of C++ over memory (`native.kernels()`, `csrc/fused.cpp`)
  rather than a dozen torch operations, where that library could be built; the torch code
  below computes the same and runs where it could not, with ATTNMT_NATIVE=0, and in bf16.

The products with the weights run in the compute type (bf16 under bf16 autocast, as autocast
runs the step loops'); the element-wise work (the scorer's tanh over B x S x A at every step,
the gates), the product scorers' h^T (M q) and the state run in fp32, which on CPU is faster
than bf16 element-wise work and no less exact. The gradients come back in their inputs' types.
`tests/model/test_fast.py` checks both against the step loops (fp32 and bf16), and
`tests/model/test_native.py` the loop with the C++ kernels against the loop without.

The product scorers are one formula: dot has M = I and d = 1, scaled dot M = I and
d = sqrt(H), bilinear M = W and d = 1. Where the scorer has an M, M q is computed in the same
product as the GRU's q W_hh^T, as additive's U q is.

Shapes: B batch, P the rows of the products (B, padded), T steps (target or source length),
S source length, E input width (0 when the decoder leaves the previous word out of the RNN
input), H hidden width (= key width), A attention width (additive's, or M's rows: 0 without M).
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch import Tensor, nn

from attnmt.model import blocks, native


def bahdanau_gru_loop(
    embedded: Tensor,
    start: Tensor,
    keys: Tensor,
    prepared_keys: Tensor,
    mask: Tensor,
    gru: tuple[Tensor, Tensor, Tensor, Tensor],
    scorer: tuple[Tensor | None, Tensor | None, float],
) -> tuple[Tensor, Tensor, Tensor]:
    """The step loop's q_t (B, T, H), context_t (B, T, H) and attention weights (B, T, S), for
    embedded previous words (B, T, E), q_0 `start` (B, H), keys (B, S, H), the scorer's
    prepared keys (`Attention.prepare_keys`: W h (B, S, A) for additive, the keys themselves for
    the products) and the mask (B, S). `gru`: its weight_ih (3H, E + H), weight_hh (3H, H),
    bias_ih and bias_hh (3H,), where weight_ih has no E columns if the RNN reads the context
    alone. `scorer`: additive's (U (A, H), v (1, A), 1.0), or a product's (M (H, H) or None
    for the identity, None, d)."""
    query_weight, v, divisor = scorer
    weights = (*gru, query_weight, v)
    keep = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (embedded, start, keys, prepared_keys, *weights)
    )
    return _BahdanauGRULoop.apply(
        embedded, start, keys, prepared_keys, mask, keep, divisor, *weights
    )


def gru_layer(inputs: Tensor, gru: tuple[Tensor, Tensor, Tensor, Tensor]) -> Tensor:
    """What a one-layer, one-way GRU from a zero state computes over `inputs` (B, T, I): the
    state after each position (B, T, H). `gru`: weight_ih (3H, I), weight_hh (3H, H), bias_ih
    and bias_hh (3H,)."""
    keep = torch.is_grad_enabled() and any(t.requires_grad for t in (inputs, *gru))
    return _GRULayer.apply(inputs, keep, *gru)


def gru_step(inputs: Tensor, query: Tensor, gru: nn.GRU) -> Tensor:
    """One step of a one-layer GRU, x (B, I) and q_{t-1} (B, H) -> q_t (B, H), in x's type:
    its products in blocks of rows (`blocks.mm`), its gates in fp32. A decoding step (the
    batch's rows change at every step), without autograd."""
    gi = blocks.mm(inputs, gru.weight_ih_l0.t(), gru.bias_ih_l0).float()
    gh = blocks.mm(query, gru.weight_hh_l0.t(), gru.bias_hh_l0).float()
    hidden = query.size(1)
    out = torch.empty(len(query), hidden)
    kept = torch.empty(len(query), 2 * hidden), torch.empty_like(out), torch.empty_like(out)
    _gru_step(gi, gh, query.float(), kept, out, _kernels_for(inputs.dtype))
    return out.to(inputs.dtype)


def uses_kernels(x: Tensor) -> bool:
    """Whether `gru_layer` and `bahdanau_gru_loop` over x run their element-wise work as the
    fused C++ kernels: on the CPU, in fp32 (x's compute type), where they load."""
    return x.device.type == "cpu" and _kernels_for(blocks.compute_type(x)) is not None


def _kernels_for(dtype: torch.dtype) -> ModuleType | None:
    """The fused C++ kernels (`native.kernels()`) where `dtype`, the compute type, is fp32;
    None otherwise (bf16 runs its element-wise work in fp32 torch operations)."""
    return native.kernels() if dtype == torch.float32 else None


def _gru_step(
    gi: Tensor,
    gh: Tensor,
    query: Tensor,
    kept: tuple[Tensor, Tensor, Tensor],
    out: Tensor,
    kernels: ModuleType | None = None,
) -> None:
    """One GRU step from its two products gi and gh (B, 3H) and the state q_{t-1} (B, H): q_t
    into `out`, and into `kept` = (r z (B, 2H), n (B, H), gh_n (B, H)) what its backward reads.
    With `kernels` (`_kernels_for`), in one pass of C++."""
    if kernels is not None:
        kernels.gru_forward(gi, gh, query, *kept, out)
        return
    gates_rz, gates_n, hidden_n = kept
    hidden = query.size(1)
    torch.sigmoid(gi[:, : 2 * hidden] + gh[:, : 2 * hidden], out=gates_rz)  # r z
    r, z = gates_rz.chunk(2, 1)
    hidden_n.copy_(gh[:, 2 * hidden :])
    torch.tanh(torch.addcmul(gi[:, 2 * hidden :], r, hidden_n), out=gates_n)  # n
    torch.addcmul(gates_n, z, query - gates_n, out=out)  # n + z (q_{t-1} - n)


def _gru_step_backward(
    grad_q: Tensor,
    query: Tensor,
    kept: tuple[Tensor, Tensor, Tensor],
    grad_gi: Tensor,
    grad_gh: Tensor,
    kernels: ModuleType | None = None,
) -> Tensor:
    """`_gru_step` backward, for d q_t (B, H): d gi and d gh (B, 3H) into `grad_gi` and
    `grad_gh`, and returned, the part of d q_{t-1} that skips the products, z d q_t (the rest
    is d gh W_hh). With `kernels`, in one pass of C++."""
    if kernels is not None:
        grad_direct = torch.empty_like(grad_q)
        kernels.gru_backward(grad_q, query, *kept, grad_gi, grad_gh, grad_direct)
        return grad_direct
    gates_rz, gates_n, hidden_n = kept
    r, z = gates_rz.chunk(2, 1)
    grad_n = grad_q * (1 - z) * (1 - gates_n * gates_n)  # d (gi_n + r gh_n)
    grad_rz = torch.cat([grad_n * hidden_n, grad_q * (query - gates_n)], 1)
    grad_rz.mul_(gates_rz * (1 - gates_rz))  # d (gi + gh) of r and z: (B, 2H)
    grad_gi.copy_(torch.cat([grad_rz, grad_n], 1))
    grad_gh.copy_(torch.cat([grad_rz, grad_n * r], 1))
    return grad_q * z


def _gru_buffers(steps: int, batch: int, hidden: int) -> tuple[Tensor, Tensor, Tensor]:
    """Each step's r z (T, B, 2H), n and gh_n (T, B, H), in fp32: what `_gru_step` keeps."""
    return (
        torch.empty(steps, batch, 2 * hidden),
        torch.empty(steps, batch, hidden),
        torch.empty(steps, batch, hidden),
    )


def _product_input(states: Tensor, rows: int, dtype: torch.dtype) -> Tensor:
    """The buffer from which each step's products read `states` (T, B, H, fp32, filled step by
    step): `states` itself where the products run in fp32 on B rows; else (T, P, H) in `dtype`,
    zero, into which the loop copies each step's B rows."""
    if dtype == states.dtype and rows == states.size(1):
        return states
    return states.new_zeros(states.size(0), rows, states.size(2), dtype=dtype)


def _gradient_buffer(steps: int, rows: int, batch: int, width: int, dtype: torch.dtype) -> Tensor:
    """(T, P, width) for each step's gradients of a product's input, of which the steps write the
    first `batch` rows: zero past them, so that the padding rows add nothing to the products."""
    make = torch.zeros if rows > batch else torch.empty
    return make(steps, rows, width, dtype=dtype)


def _rows_in(x: Tensor, rows: int, dtype: torch.dtype) -> Tensor:
    """x (T, B, D) as (T, P, D) in `dtype`, zero in the rows past B."""
    padded = x.new_zeros(x.size(0), rows, x.size(2), dtype=dtype)
    padded[:, : x.size(1)] = x
    return padded


class _BahdanauGRULoop(torch.autograd.Function):
    """Forward: the loop, keeping what the backward reads (time-major, one tensor each).
    Backward: the loop reversed, each step's gradients by the chain rule; the weights'
    gradients afterwards, one product each over all steps. Names: q the GRU state, a the
    attention weights, e = tanh(W h + U q) (additive), U the query's projection (additive's U,
    bilinear's M, or none); `*_in` the products' inputs (P rows, compute type).
    """

    @staticmethod
    def forward(ctx, embedded, start, keys, prepared, mask, keep, divisor, W_ih, W_hh, b_ih, b_hh, U, v):  # noqa: ANN001, ANN205, N803, E501 # fmt: skip
        inputs = (embedded, start, keys, prepared, W_ih, W_hh, b_ih, b_hh, U, v)
        ctx.dtypes = [None if t is None else t.dtype for t in inputs]
        ctx.divisor = divisor
        dt = blocks.compute_type(keys)
        ctx.kernels = kernels = _kernels_for(dt)
        additive = v is not None
        with blocks.autocast_off(keys):
            batch, steps = embedded.shape[:2]
            hidden, attn = W_hh.size(1), 0 if U is None else U.size(0)
            rows = blocks.padded_rows(batch, dt, keys.device)
            fed = W_ih.size(1) - hidden  # E: the embedding's columns of W_ih come first
            W_x, W_c = W_ih[:, :fed].to(dt), W_ih[:, fed:].to(dt)  # (3H, E), (3H, H)
            # U q (where the scorer has a U) and q W_hh^T in one product
            W_q = (W_hh if U is None else torch.cat([U, W_hh])).to(dt)
            b_q = torch.cat([b_hh.new_zeros(attn), b_hh]).to(dt)  # U q has no bias
            if additive:
                v = v.float().t()  # (A, 1)
            keys, prepared = keys.float(), prepared.float().contiguous()
            # The embedding's share of every step's input product, all steps at once: (T, P, 3H)
            x_in = None
            if fed:
                x_in = _rows_in(embedded.transpose(0, 1), rows, dt)  # (T, P, E)
                gates_x = blocks.mm(x_in.view(steps * rows, fed), W_x.t(), b_ih.to(dt))
                gates_x = gates_x.view(steps, rows, -1)
            else:  # the RNN reads the context alone
                gates_x = b_ih.to(dt).expand(steps, rows, -1)
            padding = ~mask  # (B, S)
            queries = keys.new_empty(steps + 1, batch, hidden)  # q_0 .. q_T
            queries[0] = start
            contexts = keys.new_empty(steps, batch, hidden)
            query_in = _product_input(queries, rows, dt)
            if query_in is not queries:
                query_in[0, :batch] = start
            context_in = _product_input(contexts, rows, dt)
            attention = keys.new_empty(steps, batch, keys.size(1))
            # for the backward: each step's e (in the compute type: the largest of these), or M q
            energies = energy = projections = None
            if additive:
                energies = prepared.new_empty(steps, *prepared.shape, dtype=dt) if keep else None
                energy = torch.empty_like(prepared)  # this step's e: (B, S, A)
            elif attn and keep:
                projections = keys.new_empty(steps, batch, attn)  # each step's M q
            kept = _gru_buffers(steps, batch, hidden)
            for t in range(steps):
                projected = torch.addmm(b_q, query_in[t], W_q.t())[:batch]  # [U q; gh]: (B, A+3H)
                if not additive:  # s_i = h_i^T (M q) / d: (B, S)
                    query = projected[:, :attn].float() if attn else queries[t]
                    if projections is not None:
                        projections[t] = query
                    scores = torch.bmm(prepared, query.unsqueeze(-1)).squeeze(-1).div_(divisor)
                elif kernels is not None:  # e (into the kept buffer, fp32 here) and s in one pass
                    step_energy = energies[t] if keep else energy
                    scores = kernels.energy_forward(
                        prepared, projected[:, :attn], v[:, 0], step_energy
                    )
                else:
                    torch.add(prepared, projected[:, :attn].unsqueeze(1), out=energy)  # W h + U q
                    energy.tanh_()
                    scores = (energy @ v).squeeze(-1)  # s_i = v^T e_i: (B, S)
                    if keep:
                        energies[t] = energy
                attention[t] = scores.masked_fill_(padding, float("-inf")).softmax(-1)  # a
                torch.bmm(attention[t].unsqueeze(1), keys, out=contexts[t].unsqueeze(1))
                if context_in is not contexts:
                    context_in[t, :batch] = contexts[t]
                gi = torch.addmm(gates_x[t], context_in[t], W_c.t())[:batch].float()
                gh = projected[:, attn:].float()
                _gru_step(gi, gh, queries[t], [k[t] for k in kept], queries[t + 1], kernels)
                if query_in is not queries:
                    query_in[t + 1, :batch] = queries[t + 1]
        if keep:
            # the products' score reads the prepared keys (the keys) and each step's M q
            read = (None, None) if additive else (prepared, projections)
            ctx.save_for_backward(
                x_in, keys, W_x, W_c, W_q, v, queries, query_in, contexts, context_in,
                attention, energies, *read, *kept,
            )  # fmt: skip
        outputs = (queries[1:], contexts, attention)
        return tuple(o.transpose(0, 1).to(dt) for o in outputs)

    @staticmethod
    def backward(ctx, grad_queries, grad_contexts, grad_attention):  # noqa: ANN001, ANN205
        (x_in, keys, W_x, W_c, W_q, v, queries, query_in, contexts, context_in, attention,
         energies, prepared, projections, *kept) = ctx.saved_tensors  # fmt: skip
        steps, batch, hidden = contexts.shape
        rows, attn = query_in.size(1), W_q.size(0) - 3 * hidden
        kernels, divisor, additive = ctx.kernels, ctx.divisor, v is not None
        with blocks.autocast_off(keys):
            grad_queries = _time_major(grad_queries, contexts)
            grad_contexts = _time_major(grad_contexts, contexts)
            grad_attention = _time_major(grad_attention, attention)
            # each step's d gi and [d (U q); d gh], the products' inputs: (T, P, *)
            grad_gi = _gradient_buffer(steps, rows, batch, 3 * hidden, W_q.dtype)
            grad_projected = _gradient_buffer(steps, rows, batch, attn + 3 * hidden, W_q.dtype)
            grad_context = torch.empty_like(contexts)  # d context_t, all of it
            grad_scores = torch.empty_like(attention)  # d s_t
            keys_t = keys.transpose(1, 2).contiguous()  # (B, H, S)
            grad_v = None  # v's: additive's alone
            if additive:
                grad_v = torch.zeros_like(v.t())  # (1, A)
                v_row = v[:, 0]  # (A,)
                energy = torch.empty(energies.shape[1:])  # this step's e, then d s e^2
                grad_energies = torch.zeros_like(energy)  # the sum over steps of d s e^2
            grad_q = torch.zeros_like(contexts[0])  # d loss / d q_t from the steps after t
            for t in reversed(range(steps)):
                grad_q = grad_q + grad_queries[t]
                step_kept = [k[t] for k in kept]
                grad_direct = _gru_step_backward(
                    grad_q,
                    queries[t],
                    step_kept,
                    grad_gi[t, :batch],
                    grad_projected[t, :batch, attn:],
                    kernels,
                )
                # the context feeds the GRU, and the caller's features
                into_context = (grad_gi[t] @ W_c)[:batch]
                torch.add(grad_contexts[t], into_context, out=grad_context[t])
                # context = sum_i a_i h_i: d a_i = h_i . d context; d s = a (d a - a . d a)
                a = attention[t]
                grad_a = torch.bmm(grad_context[t].unsqueeze(1), keys_t).squeeze(1)  # (B, S)
                grad_a += grad_attention[t]
                grad_s = grad_scores[t]
                torch.mul(a, grad_a - (a * grad_a).sum(-1, keepdim=True), out=grad_s)
                grad_uq = grad_projected[t, :batch, :attn]  # (B, A)
                if not additive:  # s = h^T (M q) / d: d (M q) = H^T d s / d
                    grad_query = torch.bmm(grad_s.unsqueeze(1), prepared).squeeze(1).div_(divisor)
                    if attn:
                        grad_uq.copy_(grad_query)
                    else:  # M = I: q itself
                        grad_direct += grad_query
                elif kernels is not None:  # s = v^T e, in one pass as below
                    kernels.energy_backward(
                        grad_s, energies[t], v_row, grad_energies, grad_uq, grad_v[0]
                    )
                else:  # s = v^T e: d v += d s e; d (W h + U q) = v (1 - e^2) d s
                    energy.copy_(energies[t])
                    grad_v += grad_s.view(1, -1) @ energy.view(-1, energy.size(-1))
                    energy.square_().mul_(grad_s.unsqueeze(-1))
                    grad_energies += energy
                    grad_uq.copy_((grad_s.sum(1, keepdim=True) - energy.sum(1)) * v_row)
                grad_q = torch.add(grad_direct, (grad_projected[t] @ W_q)[:batch])
            # the weights' gradients, one product each over all T x P rows
            products = steps * rows
            gi = grad_gi.view(products, -1)
            grad_W_c = blocks.mm_at(gi, context_in.view(products, hidden))
            grad_W_q = blocks.mm_at(
                grad_projected.view(products, -1), query_in[:steps].flatten(0, 1)
            )
            grad_W_ih, grad_embedded = grad_W_c, None
            if x_in is not None:
                grad_W_ih = torch.cat([blocks.mm_at(gi, x_in.flatten(0, 1)), grad_W_c], 1)
                grad_embedded = blocks.mm(gi, W_x).view(steps, rows, -1)[:, :batch].transpose(0, 1)
            # d of the prepared keys through the scores: every step's d (W h + U q) summed: d (W h)
            if additive:
                grad_prepared = (grad_scores.sum(0).unsqueeze(-1) - grad_energies) * v_row
            else:  # the keys themselves: sum_t d s_t (M q_t)^T / d
                query = projections if attn else queries[:steps]  # (T, B, H)
                grad_prepared = torch.bmm(grad_scores.permute(1, 2, 0), query.transpose(0, 1))
                grad_prepared /= divisor
            # d H through the contexts: sum_t a_t d c_t
            grad_keys = torch.bmm(attention.permute(1, 2, 0), grad_context.transpose(0, 1))
            grads = (
                grad_embedded,
                grad_q,
                grad_keys,
                grad_prepared,
                grad_W_ih,
                grad_W_q[attn:],
                gi.sum(0).float(),
                grad_projected.view(products, -1)[:, attn:].sum(0).float(),
                grad_W_q[:attn] if attn else None,
                grad_v,
            )
        out = [None if g is None else g.to(d) for g, d in zip(grads, ctx.dtypes, strict=True)]
        return (*out[:4], None, None, None, *out[4:])


class _GRULayer(torch.autograd.Function):
    """`gru_layer`: forward keeps each step's gates; backward runs the steps in reverse. Names
    as in `_BahdanauGRULoop`."""

    @staticmethod
    def forward(ctx, inputs, keep, W_ih, W_hh, b_ih, b_hh):  # noqa: ANN001, ANN205, N803
        ctx.dtypes = [t.dtype for t in (inputs, W_ih, W_hh, b_ih, b_hh)]
        dt = blocks.compute_type(inputs)
        ctx.kernels = kernels = _kernels_for(dt)
        with blocks.autocast_off(inputs):
            batch, steps, width = inputs.shape
            hidden = W_hh.size(1)
            rows = blocks.padded_rows(batch, dt, inputs.device)
            W_ih, W_hh, b_hh = W_ih.to(dt), W_hh.to(dt), b_hh.to(dt)
            x_in = _rows_in(inputs.transpose(0, 1), rows, dt)  # (T, P, I)
            gates_x = blocks.mm(x_in.view(steps * rows, width), W_ih.t(), b_ih.to(dt))
            gates_x = gates_x.view(steps, rows, -1)  # x W_ih^T + b_ih, all steps: (T, P, 3H)
            states = torch.zeros(steps + 1, batch, hidden)  # q_0 = 0 .. q_T
            state_in = _product_input(states, rows, dt)
            kept = _gru_buffers(steps, batch, hidden)
            for t in range(steps):
                gh = torch.addmm(b_hh, state_in[t], W_hh.t())[:batch].float()  # (B, 3H)
                gi = gates_x[t, :batch].float()
                _gru_step(gi, gh, states[t], [k[t] for k in kept], states[t + 1], kernels)
                if state_in is not states:
                    state_in[t + 1, :batch] = states[t + 1]
        if keep:
            ctx.save_for_backward(x_in, W_ih, W_hh, states, state_in, *kept)
        return states[1:].transpose(0, 1).to(dt)

    @staticmethod
    def backward(ctx, grad_states):  # noqa: ANN001, ANN205
        x_in, W_ih, W_hh, states, state_in, *kept = ctx.saved_tensors
        steps, rows = x_in.shape[:2]
        batch, hidden = states.shape[1:]
        with blocks.autocast_off(x_in):
            grad_states = grad_states.transpose(0, 1).float()  # (T, B, H)
            grad_gi = _gradient_buffer(steps, rows, batch, 3 * hidden, W_hh.dtype)
            grad_gh = _gradient_buffer(steps, rows, batch, 3 * hidden, W_hh.dtype)
            grad_q = torch.zeros(batch, hidden)
            for t in reversed(range(steps)):
                grad_q = grad_q + grad_states[t]
                step_kept = [k[t] for k in kept]
                grad_direct = _gru_step_backward(
                    grad_q,
                    states[t],
                    step_kept,
                    grad_gi[t, :batch],
                    grad_gh[t, :batch],
                    ctx.kernels,
                )
                if t:  # q_0 is no parameter
                    grad_q = torch.add(grad_direct, (grad_gh[t] @ W_hh)[:batch])
            products = steps * rows
            gi, gh = grad_gi.view(products, -1), grad_gh.view(products, -1)
            grads = (
                blocks.mm(gi, W_ih).view(steps, rows, -1)[:, :batch].transpose(0, 1),
                blocks.mm_at(gi, x_in.view(products, -1)),
                blocks.mm_at(gh, state_in[:steps].flatten(0, 1)),
                gi.sum(0).float(),
                gh.sum(0).float(),
            )
        grad_inputs, *grad_weights = (g.to(d) for g, d in zip(grads, ctx.dtypes, strict=True))
        return grad_inputs, None, *grad_weights


def _time_major(grad: Tensor | None, like: Tensor) -> Tensor:
    """An output's gradient (B, T, *) as `like` (T, B, *), in fp32 (zeros where none)."""
    if grad is None:
        return torch.zeros_like(like)
    return grad.transpose(0, 1).float()
