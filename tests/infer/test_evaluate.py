"""attnmt-evaluate: its BLEU is sacrebleu's, and its report says where everything is."""

import json
import subprocess
import sys

from attnmt.infer.evaluate import bleu_tokenizer, score


def test_scores_use_the_tokenizer_of_the_target_language():
    assert bleu_tokenizer("zh") == "zh" and bleu_tokenizer("en") == "13a"
    zh = score(["我很好。"], ["我很好。"], "zh")
    assert zh.bleu == 100.0 and "tok:zh" in zh.signature
    assert "tok:13a" in score(["I am fine."], ["I am fine."], "en").signature


def test_printed_bleu_equals_the_sacrebleu_command(trained_run, tmp_path):
    report = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "attnmt.cli.evaluate",
        f"ckpt={trained_run / 'best.pt'}",
        "sets=[dev,test]",
        f"report={report}",
        f"output_dir={tmp_path}",
        "device=cpu",
        "threads=1",
        "beam_size=2",
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    entries = json.loads(report.read_text(encoding="utf-8"))["sets"]
    assert [e["name"] for e in entries] == ["dev", "test"]
    for entry in entries:
        assert f"{entry['name']}: BLEU {entry['bleu']:.2f}" in result.stdout
        assert entry["signature"] in result.stdout and "chrF" in result.stdout
        sacrebleu = subprocess.run(
            [
                sys.executable,
                "-m",
                "sacrebleu",
                entry["reference"],
                "-i",
                entry["hypotheses"],
                "-m",
                "bleu",
                "-b",
                "-w",
                "2",
                "-tok",
                "13a",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert float(sacrebleu.stdout) == entry["bleu"]


def test_any_source_and_reference_pair(trained_run, tmp_path):
    source, reference = tmp_path / "mine.zh", tmp_path / "mine.en"
    source.write_text("我很好。\n你好！\n", encoding="utf-8")
    reference.write_text("I'm fine.\nHello!\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "attnmt.cli.evaluate",
        f"ckpt={trained_run / 'best.pt'}",
        "sets=[]",
        f"source={source}",
        f"reference={reference}",
        f"output_dir={tmp_path / 'out'}",
        "device=cpu",
        "threads=1",
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("mine: BLEU")
    assert (tmp_path / "out" / "mine.hyp.en").read_text(encoding="utf-8").count("\n") == 2
