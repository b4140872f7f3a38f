"""The models a service serves, by name: ckpt=PATH as one model named "default", or
models={NAME: PATH or [PATHS], ...} for several (a list is an ensemble), all in one
direction."""

from __future__ import annotations

import re

from attnmt.errors import ConfigError
from attnmt.infer.translate import Translator

# The name of the one model of ckpt=PATH (a request may name it, or name none).
DEFAULT_MODEL = "default"
# A model's name travels in JSON and in the page: a word, no spaces or markup.
MODEL_NAME = re.compile(r"[\w.-]{1,64}")

Checkpoints = str | list[str]  # one model file, or the files of an ensemble


def named_models(
    ckpt: Checkpoints | None, models: dict[str, Checkpoints] | None
) -> dict[str, Checkpoints]:
    """The models to serve, by name, the default first: ckpt=PATH as one model named
    "default", or the models={NAME: PATH or [PATHS], ...} mapping; a ConfigError names the
    key at fault."""
    if ckpt is not None and models is not None:
        raise ConfigError(
            "ckpt and models: give one of them (ckpt=PATH serves one model, "
            "models={NAME: PATH, ...} several)"
        )
    if models is None:
        if ckpt is None:
            raise ConfigError("attnmt-serve needs ckpt=PATH or models={NAME: PATH, ...}")
        return {DEFAULT_MODEL: ckpt}
    if not models:
        raise ConfigError("models={}: name at least one model, e.g. models={a: A.pt, b: B.pt}")
    for name, paths in models.items():
        if not (isinstance(name, str) and MODEL_NAME.fullmatch(name)):
            raise ConfigError(
                f"models: {name!r} is not a model name; use 1 to 64 letters, digits, _ . -"
            )
        files = paths if isinstance(paths, list) else [paths]
        if not files or not all(isinstance(f, str) and f for f in files):
            raise ConfigError(
                f"models.{name}={paths!r}: expected a checkpoint file or a list of them (an "
                "ensemble)"
            )
    return dict(models)


def load_models(
    files: dict[str, Checkpoints], device: str, quantize: str | None, dtype: str
) -> dict[str, Translator]:
    """The translators of `files` (named_models' mapping), by name, in its order; each on
    `device`, in its precision. A ConfigError where two translate in different directions."""
    models = {
        name: Translator.load(paths, device, quantize, dtype) for name, paths in files.items()
    }
    first, *others = models.items()  # the page sends one sentence to all of them
    for name, translator in others:
        if (translator.src_lang, translator.tgt_lang) != (first[1].src_lang, first[1].tgt_lang):
            raise ConfigError(
                f"models.{name} translates {translator.src_lang}->{translator.tgt_lang}, but "
                f"models.{first[0]} {first[1].src_lang}->{first[1].tgt_lang}: served models "
                "share one direction"
            )
    return models
