"""Sequence-level knowledge distillation (Kim and Rush 2016): the corpus a student learns from.

A student trained on its teacher's beam-search output rather than on the references learns the
teacher's one consistent choice for each source, which is easier to fit than the references'
variety; with an ensemble as the teacher (Freitag et al. 2017) one student can come close to
the ensemble. The teacher translates the source side of the training split of the dataset it
was trained on (every training pair of it: with several corpora, all of theirs, not one
epoch's draw); the dev and test splits are copied unchanged, so the student is validated and
scored on the same pairs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from attnmt.data.corpus import read_lines
from attnmt.errors import ConfigError, DataError
from attnmt.infer.evaluate import processed_sets
from attnmt.infer.translate import SearchConfig, Translator
from attnmt.infer.writers import translate_stream


def distill_corpus(teacher: Translator, search: SearchConfig, folder: Path) -> str:
    """Write the student's split folder into `folder` (train.{src} and the teacher's
    train.{tgt}, dev and test as they are, and `langs`); return the overrides that give the
    student the teacher's direction."""
    if search.n_best != 1:
        raise ConfigError(f"n_best={search.n_best}: the teacher gives one translation a line")
    try:
        train, *held_out = processed_sets(teacher, ["train", "dev", "test"])
    except DataError as error:
        raise DataError(
            f"ckpt: the teacher translates the training split of the dataset it was trained on, "
            f"which must be on this machine ({error})"
        ) from None
    src, tgt = teacher.src_lang, teacher.tgt_lang
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"train.{tgt}", "w", encoding="utf-8") as out:
        translate_stream(teacher, read_lines(train.source), search, out)
    shutil.copyfile(train.source, folder / f"train.{src}")
    for split in held_out:
        shutil.copyfile(split.source, folder / f"{split.name}.{src}")
        shutil.copyfile(split.reference, folder / f"{split.name}.{tgt}")
    direction = f"data.src_lang={src} data.tgt_lang={tgt}"
    (folder / "langs").write_text(direction + "\n", encoding="utf-8")  # for make distill
    return direction
