"""The fast twins swapped in for the plain modules they equal, the way `torch.ao.quantization`
swaps modules: `accelerate(model)`.

The plain modules (`seq2seq.py`, `encoder.py`, `decoder.py`, `attention.py`, `state.py`) are
the formulas as the lesson writes them; each module that has a fast twin (`fast.py`) becomes
that twin, in place. A twin is a subclass with the same parameters and state_dict keys, so a
checkpoint is the same file either way and loads into either. `build.build_model` calls it
unless `model.fast=false`.
"""

from __future__ import annotations

from torch import nn

from attnmt.model.decoder import BahdanauDecoder, LuongDecoder
from attnmt.model.encoder import RNNEncoder
from attnmt.model.fast import (
    BlockedLinear,
    Dropout,
    FastBahdanauDecoder,
    FastLuongDecoder,
    PaddedRNNEncoder,
)

# Each plain module type and its fast twin; only modules of exactly that type are swapped, so
# a subclass (a user's, or an int8 layer) keeps its own code.
TWINS: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: BlockedLinear,
    nn.Dropout: Dropout,
    RNNEncoder: PaddedRNNEncoder,
    BahdanauDecoder: FastBahdanauDecoder,
    LuongDecoder: FastLuongDecoder,
}


def accelerate(model: nn.Module) -> nn.Module:
    """`model` with every module that has a twin in TWINS turned into that twin, in place."""
    for module in model.modules():
        twin = TWINS.get(type(module))
        if twin is not None:
            module.__class__ = twin
    return model
