"""From a config to the model: the one function that wires encoder, attention and decoder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attnmt import options
from attnmt.config import checked, in_range
from attnmt.errors import ConfigError
from attnmt.model.accelerate import accelerate
from attnmt.model.encoder import MAX_WIDTH
from attnmt.model.seq2seq import Seq2Seq


def fast_model(config: Mapping[str, Any]) -> bool:
    """The config's `model.fast` (true where a config, such as an older checkpoint's, has
    none)."""
    return checked(config.get("model", {}).get("fast", True), bool, "model.fast")


def build_model(
    config: Mapping[str, Any], src_vocab_size: int, tgt_vocab_size: int, fast: bool | None = None
) -> Seq2Seq:
    """The model of a config with `encoder`, `decoder` and `attention` groups (each `_target_`),
    accelerated unless `fast` (by default the config's `model.fast`) is false."""
    fast = fast_model(config) if fast is None else fast
    encoder = options.build(config["encoder"], "encoder", vocab_size=src_vocab_size)
    if "hidden_size" not in config["decoder"]:
        raise ConfigError("decoder.hidden_size is required: it sets the query and key width")
    hidden = checked(config["decoder"]["hidden_size"], int, "decoder.hidden_size")
    in_range("decoder.hidden_size", hidden, 1, MAX_WIDTH)  # the attention is built first
    attention = options.build(config["attention"], "attention", query_dim=hidden, key_dim=hidden)
    decoder = options.build(
        config["decoder"],
        "decoder",
        vocab_size=tgt_vocab_size,
        attention=attention,
        encoder_dim=encoder.output_size,
    )
    model = Seq2Seq(encoder, decoder)
    return accelerate(model) if fast else model
