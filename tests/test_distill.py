"""attnmt-distill: the teacher's translations of its training split as the student's corpus."""

from attnmt.cli.common import tool_config
from attnmt.cli.distill import DistillOptions, run
from attnmt.data.corpus import read_lines
from attnmt.infer.translate import Translator
from attnmt.train.build import build_trainer
from tests.conftest import compose_config, plain, tiny_train_overrides
from tests.train.test_trainer import losses


def test_the_student_trains_on_the_teachers_beam_output(trained_run, tmp_path, capsys):
    teacher_file = trained_run / "best.pt"
    out = tmp_path / "corpus"
    run(
        tool_config(
            "distill", [f"ckpt=[{teacher_file},{teacher_file}]", f"output={out}"], DistillOptions
        )
    )
    assert "data=splits" in capsys.readouterr().out
    assert (out / "langs").read_text(encoding="utf-8").split() == [
        "data.src_lang=zh",
        "data.tgt_lang=en",
    ]
    teacher = Translator.load([teacher_file, teacher_file])
    folder = teacher.dataset_folder
    sources = list(read_lines(out / "train.zh"))
    assert sources == list(read_lines(folder / "train.zh"))
    produced = list(read_lines(out / "train.en"))
    assert len(produced) == len(sources)
    assert produced == [t.text for t in teacher.translate(sources, beam_size=5)]  # one chunk
    for split in ("dev", "test"):  # the student is scored on the same pairs
        for lang in ("zh", "en"):
            assert (out / f"{split}.{lang}").read_bytes() == (
                folder / f"{split}.{lang}"
            ).read_bytes()
    overrides = [
        *tiny_train_overrides(tmp_path / "unused.txt", tmp_path / "data"),
        "data=splits",
        f"data.split_dir={out}",
        "trainer.max_steps=3",
        # a young teacher's output has few distinct words: its characters, the meta pieces
        f"data.vocab.tgt_size={len(set(''.join(produced))) + 12}",
    ]
    overrides = [o for o in overrides if not o.startswith(("data.raw_path", "data.sha256"))]
    (tmp_path / "student").mkdir()
    build_trainer(plain(compose_config("train", overrides)), tmp_path / "student").fit()
    assert [step for step, _ in losses(tmp_path / "student")] == [1, 2, 3]
