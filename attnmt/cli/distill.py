"""attnmt-distill ckpt=PATH output=DIR: the training corpus of a distilled student.

Sequence-level knowledge distillation (Kim and Rush 2016): a student trained on its teacher's
beam-search output rather than on the references learns the teacher's one consistent choice
for each source, which is easier to fit than the references' variety; with an ensemble as the
teacher (Freitag et al. 2017) one student can come close to the ensemble. The teacher
translates the source side of the training split of the dataset it was trained on; the dev and
test splits are copied unchanged, so the student is validated and scored on the same pairs.
The direction goes to DIR/langs as the overrides that train the student the same way.
"""

import logging
import shutil
from dataclasses import dataclass

from attnmt.cli.common import ModelToolOptions, run_tool
from attnmt.config import output_path
from attnmt.data.corpus import chunks, read_lines
from attnmt.errors import DataError
from attnmt.infer.evaluate import processed_sets
from attnmt.runtime import keep_freed_memory, set_threads

log = logging.getLogger("attnmt")

CHUNK = 5_000  # sentences translated between progress lines


@dataclass(frozen=True, kw_only=True)
class DistillOptions(ModelToolOptions):
    """attnmt-distill's keys; configs/tools/distill.yaml documents them."""

    output: str


def main() -> None:
    run_tool("distill", DistillOptions, run)


def run(cfg: DistillOptions) -> None:
    """Write the student's split folder, as the module docstring says."""
    set_threads(cfg.threads)
    keep_freed_memory()
    out = output_path(cfg.output, "output", folder=True)
    out.mkdir(parents=True, exist_ok=True)
    teacher = cfg.load()
    try:
        train, *held_out = processed_sets(teacher, ["train", "dev", "test"])
    except DataError as error:
        raise DataError(
            f"ckpt={cfg.ckpt}: the teacher translates the training split of the dataset it was "
            f"trained on, which must be on this machine ({error})"
        ) from None
    sources = list(read_lines(train.source))
    translations: list[str] = []
    for chunk in chunks(sources, CHUNK):
        results = teacher.translate(chunk, cfg.search, first_line=len(translations) + 1)
        translations += [r.text for r in results]
        log.info("translated %d of %d training sentences", len(translations), len(sources))
    src, tgt = teacher.src_lang, teacher.tgt_lang
    shutil.copyfile(train.source, out / f"train.{src}")
    (out / f"train.{tgt}").write_text("".join(t + "\n" for t in translations), encoding="utf-8")
    for split in held_out:
        shutil.copyfile(split.source, out / f"{split.name}.{src}")
        shutil.copyfile(split.reference, out / f"{split.name}.{tgt}")
    direction = f"data.src_lang={src} data.tgt_lang={tgt}"
    (out / "langs").write_text(direction + "\n", encoding="utf-8")  # for make distill
    print(f"{out}: the student's corpus; train it with")
    print(f"  attnmt-train data=splits data.split_dir={out} {direction}")


if __name__ == "__main__":
    main()
