"""attnmt-translate as a user runs it: files and stdin, odd lines, n-best, attention output."""

import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.infer.translate import Translator
from attnmt.pieces import labels
from attnmt.runtime import cpu_has_bf16, quantize
from attnmt.vocab import UNK_ID
from tests.pictures import heatmap_pixels, pixels


def translate(run_dir, *overrides, stdin=b""):
    command = [
        str(Path(sysconfig.get_path("scripts")) / "attnmt-translate"),  # as users start it
        f"ckpt={run_dir / 'best.pt'}",
        "device=cpu",
        "threads=1",
        *overrides,
    ]
    return subprocess.run(command, input=stdin, capture_output=True, cwd=run_dir)


def test_lines_in_order_with_empty_and_overlong_lines(trained_run):
    long_line = "我" * 300
    text = f"我很好。\n\n你好！\n{long_line}\n".encode()
    result = translate(trained_run, "beam_size=3", "max_input_length=50", stdin=text)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().split("\n")
    assert len(lines) == 5 and lines[-1] == ""  # four outputs, one per input line
    assert lines[1] == "" and lines[0] and lines[2]
    assert b"line 4" in result.stderr and b"truncated" in result.stderr


def test_invalid_utf8_names_the_line(trained_run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes("好\n".encode() + b"\xff\xfe\n")
    result = translate(trained_run, f"input={source}")
    assert result.returncode == 2
    assert f"{source}:2: invalid UTF-8".encode() in result.stderr


def test_nbest_rows_and_attention_file_and_heatmaps(trained_run, tmp_path):
    npz, plots, out = tmp_path / "att.npz", tmp_path / "plots", tmp_path / "out.txt"
    result = translate(
        trained_run,
        "beam_size=4",
        "n_best=3",
        f"attention={npz}",
        f"plot={plots}",
        f"output={out}",
        stdin="我很好。\n你好！\n".encode(),
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split(" ||| ") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1"]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    saved = np.load(npz)
    weights, source, target = saved["attention_0"], saved["source_0"], saved["target_0"]
    assert weights.shape == (len(target), len(source))
    assert np.allclose(weights.sum(1), 1, atol=1e-5)
    assert pixels(plots / "attention_0.png").shape[:2] == heatmap_pixels(*weights.shape)


@pytest.mark.parametrize("beam", [1, 5])
def test_file_input_gives_one_line_per_line(trained_run, tmp_path, beam):
    source = tmp_path / "in.txt"
    source.write_text("我很好。\n你好！\n走开！\n", encoding="utf-8")
    result = translate(trained_run, f"input={source}", f"beam_size={beam}")
    assert result.returncode == 0 and len(result.stdout.decode().splitlines()) == 3


def test_a_stream_in_blocks_gives_what_one_block_gives(trained_run, monkeypatch, caplog):
    import io

    from attnmt.infer import writers
    from attnmt.infer.translate import SearchConfig, Translator

    translator = Translator.load(trained_run / "best.pt", "cpu")
    search = SearchConfig(beam_size=3, n_best=2, max_input_length=50)
    lines = ["我很好。", "", "你好！", "我" * 60, "他走了。", "我很好。", "好。"]

    def run(block_lines):
        monkeypatch.setattr(writers, "BLOCK_LINES", block_lines)
        out = io.StringIO()
        writers.translate_stream(translator, iter(lines), search, out)
        return out.getvalue()

    whole = run(100)
    with caplog.at_level("WARNING"):
        assert run(3) == whole  # n-best rows keep their input line numbers across blocks
    assert "line 4: 60 pieces" in caplog.text
    assert [row.split(" ||| ")[0] for row in whole.splitlines()][-2:] == ["6", "6"]


def test_an_output_over_the_input_is_refused_and_the_input_kept(trained_run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("我很好。\n", encoding="utf-8")
    result = translate(trained_run, f"input={source}", f"output={tmp_path / '.' / 'in.txt'}")
    assert result.returncode == 2 and b"is the input" in result.stderr
    assert source.read_text(encoding="utf-8") == "我很好。\n"


def test_unwritable_outputs_fail_before_translating(trained_run, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    result = translate(trained_run, f"attention={blocker / 'sub' / 'a.npz'}", stdin="好\n".encode())
    assert result.returncode == 2 and b"attention=" in result.stderr
    assert b"cannot create" in result.stderr and result.stdout == b""
    result = translate(trained_run, f"output={tmp_path}", stdin="好\n".encode())
    assert result.returncode == 2 and b"is a folder" in result.stderr


def test_search_settings_that_allow_no_output_are_refused(trained_run):
    result = translate(trained_run, "max_length_a=0", "max_length_b=0", stdin="好\n".encode())
    assert result.returncode == 2 and b"max_length_b=0: must be 1 to 1000" in result.stderr
    result = translate(trained_run, "beam_size=2", "n_best=3", stdin="好\n".encode())
    assert result.returncode == 2 and b"n_best=3: must be 1 to beam_size (2)" in result.stderr


def test_int8_decoding_quantizes_the_layers_and_translates_every_line(trained_run):
    sentences = ["我很好。", "", "他走了。", "我们明天去公园。"]
    int8 = Translator.load(trained_run / "best.pt", "cpu", quantize="int8")
    dynamic = "torch.ao.nn.quantized.dynamic"
    kinds = {type(m).__name__ for m in int8.model.modules() if dynamic in type(m).__module__}
    assert {"Linear", "GRU"} <= kinds
    found = int8.translate(sentences, beam_size=3)
    assert [bool(t.text) for t in found] == [True, False, True, True]
    fp32 = Translator.load(trained_run / "best.pt", "cpu")
    for mine, theirs in zip(
        int8.score(["他走了。"], ["He left."])[0].token_log_probs,
        fp32.score(["他走了。"], ["He left."])[0].token_log_probs,
        strict=True,
    ):
        assert abs(mine - theirs) < 0.5  # close to the fp32 model, not equal to it
    result = translate(trained_run, "quantize=int8", stdin="我很好。\n".encode())
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == int8.translate(["我很好。"])[0].text
    refused = translate(trained_run, "quantize=int4", stdin=b"")
    assert refused.returncode == 2 and b"quantize='int4'" in refused.stderr
    with pytest.raises(ConfigError, match="CPU only"):
        quantize(torch.nn.Linear(2, 2), "int8", torch.device("cuda"))


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no native bf16")
def test_bf16_decoding_translates_like_fp32_with_fp32_scores(trained_run, tiny_corpus):
    lines = tiny_corpus.read_text(encoding="utf-8").splitlines()
    sentences = [line.split("\t")[1] for line in lines[::10]]  # 40 of the sentences it learned
    bf16 = Translator.load(trained_run / "best.pt", "cpu", dtype="bfloat16")
    assert {p.dtype for p in bf16.model.parameters()} == {torch.bfloat16}
    found = bf16.translate(sentences, beam_size=4, attention=True)
    assert all(t.text for t in found)
    for translation in found:
        weights = translation.hypotheses[0].attention
        assert weights.dtype == np.float32
        assert weights.shape == (
            len(translation.hypotheses[0].target_pieces),
            len(translation.source_pieces),
        )
        assert np.allclose(weights.sum(1), 1.0, atol=1e-2)
    fp32 = Translator.load(trained_run / "best.pt", "cpu").translate(sentences, beam_size=4)
    same = sum(mine.text == theirs.text for mine, theirs in zip(found, fp32, strict=True))
    assert same >= len(sentences) // 2  # bf16 rounds: close to fp32, not equal to it
    greedy = bf16.translate(sentences[:5], beam_size=1)
    assert all(isinstance(t.hypotheses[0].score, float) and t.text for t in greedy)
    # the same beam as `found` (the tool's default is 5)
    result = translate(
        trained_run, "dtype=bfloat16", "beam_size=4", stdin=f"{sentences[0]}\n".encode()
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == found[0].text


def test_bf16_is_refused_with_int8_and_on_a_cpu_without_bf16(trained_run, monkeypatch):
    with pytest.raises(ConfigError, match=r"dtype=bfloat16 with quantize=int8"):
        Translator.load(trained_run / "best.pt", "cpu", quantize="int8", dtype="bfloat16")
    refused = translate(trained_run, "dtype=bfloat16", "quantize=int8", stdin=b"")
    assert refused.returncode == 2 and b"dtype=bfloat16" in refused.stderr
    refused = translate(trained_run, "dtype=float16", stdin=b"")
    assert refused.returncode == 2 and b"dtype='float16'" in refused.stderr
    monkeypatch.setattr("attnmt.runtime.cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match=r"dtype=bfloat16: this CPU has no native bf16"):
        Translator.load(trained_run / "best.pt", "cpu", dtype="bfloat16")


@pytest.mark.parametrize("beam", [1, 4])
def test_a_repeated_sentence_is_searched_once_and_gets_the_same_hypotheses(
    trained_run, monkeypatch, beam
):
    from attnmt.infer import translate as module

    translator = Translator.load(trained_run / "best.pt", "cpu")
    texts = ["我很好。", "你好！", "我很好。", "他走了。", "你好！"]
    searched = []
    search = module.greedy_batches if beam == 1 else module.beam_search_batches

    def counting(model, batches, *args, **kwargs):  # all batches at once
        searched.append(sum(b.source.size(0) for b in batches))
        return search(model, batches, *args, **kwargs)

    one_by_one = [
        translator.translate([t], beam_size=beam, n_best=beam, attention=True)[0] for t in texts
    ]
    monkeypatch.setattr(module, search.__name__, counting)
    together = translator.translate(texts, beam_size=beam, n_best=beam, attention=True)
    assert sum(searched) == 3  # three distinct sentences
    for alone, found in zip(one_by_one, together, strict=True):
        assert [h.text for h in found.hypotheses] == [h.text for h in alone.hypotheses]
        assert [h.score for h in found.hypotheses] == pytest.approx(
            [h.score for h in alone.hypotheses], abs=1e-5
        )
        assert all(
            a.attention.shape == b.attention.shape
            for a, b in zip(alone.hypotheses, found.hypotheses, strict=True)
        )
    assert together[0].hypotheses[0] is not together[2].hypotheses[0]


@pytest.mark.parametrize("beam", [1, 4])
def test_small_batches_that_join_a_running_search_translate_as_alone(
    trained_run, monkeypatch, beam
):
    # batches of one or two sentences (batch_tokens=12), each joining the sentences still
    # running, greedy or with beams
    from attnmt.infer import batches, translate

    monkeypatch.setattr(translate, "JOIN_BELOW", 100.0)  # join whenever a batch waits
    joins = []
    run = batches.run_batches

    def counting(waiting, start, step, join, join_below):
        return run(waiting, start, step, lambda *args: joins.append(1) or join(*args), join_below)

    monkeypatch.setattr(batches, "run_batches", counting)
    translator = Translator.load(trained_run / "best.pt", "cpu")
    texts = ["我很好。", "你好！", "他走了。", "我们明天去公园。", "他昨天没有来上班。", "好。"]
    n_best = min(beam, 2)
    alone = [
        translator.translate([t], beam_size=beam, n_best=n_best, attention=True)[0] for t in texts
    ]
    joins.clear()
    joined = translator.translate(
        texts, beam_size=beam, n_best=n_best, attention=True, batch_tokens=12
    )
    assert len(joins) >= 3
    for one, found in zip(alone, joined, strict=True):
        assert [h.text for h in found.hypotheses] == [h.text for h in one.hypotheses]
        assert [h.score for h in found.hypotheses] == pytest.approx(
            [h.score for h in one.hypotheses], abs=1e-5
        )
        for a, b in zip(one.hypotheses, found.hypotheses, strict=True):
            assert a.attention.shape == b.attention.shape
            assert np.allclose(a.attention, b.attention, atol=1e-5)


def test_greedy_batches_of_corpus_sentences_that_join_translate_as_without_joins(
    trained_run, tiny_corpus, monkeypatch
):
    # 40 sentences of varied lengths in batches of at most 40 tokens: without joins each
    # batch steps alone to its last sentence; with them each joins the one before it.
    from attnmt.infer import batches, translate

    lines = tiny_corpus.read_text(encoding="utf-8").splitlines()
    texts = [line.split("\t")[1] for line in lines[3::10]]
    translator = Translator.load(trained_run / "best.pt", "cpu")
    joins = []
    join = batches.join_greedy
    monkeypatch.setattr(batches, "join_greedy", lambda *rows: joins.append(1) or join(*rows))
    found = {}
    for share in (0.0, 100.0):
        monkeypatch.setattr(translate, "JOIN_BELOW", share)
        found[share] = translator.translate(texts, beam_size=1, attention=True, batch_tokens=40)
        assert bool(joins) == (share > 0)
    assert len(joins) >= 5
    for alone, joined in zip(found[0.0], found[100.0], strict=True):
        (a,), (b,) = alone.hypotheses, joined.hypotheses
        assert (b.text, b.target_pieces) == (a.text, a.target_pieces)
        assert b.score == pytest.approx(a.score, abs=1e-5)
        assert b.attention.shape == a.attention.shape
        assert np.allclose(b.attention, a.attention, atol=1e-6)


def test_a_character_the_training_data_never_had_translates_without_unk(byte_fallback_run):
    translator = Translator.load(byte_fallback_run / "best.pt")
    text = "我喜欢龘。"  # 龘: in no sentence of the made-up corpus
    assert UNK_ID not in translator.source_sp.encode(text)
    (result,) = translator.translate([text], beam_size=2, n_best=2, attention=True)
    assert result.hypotheses and result.text == result.hypotheses[0].text
    assert "<0xE9>" in result.source_pieces and "龘" in labels(result.source_pieces)
    assert all("\ufffd" not in h.text for h in result.hypotheses)
    assert len(translator.links(text, result)[0]) > 0  # alignment reads the byte pieces too


def test_a_three_sentence_chinese_paragraph_comes_back_as_its_sentences_joined(
    trained_run, monkeypatch
):
    import attnmt.infer.translate as module

    translator = Translator.load(trained_run / "best.pt")
    sentences = ["我很好。", "你好！", "他走了。"]
    alone = translator.translate(sentences, beam_size=3, n_best=2, attention=True)
    calls = []
    search = module.translate_ids
    monkeypatch.setattr(module, "translate_ids", lambda *a, **k: calls.append(1) or search(*a, **k))
    paragraph, other = translator.translate(
        ["".join(sentences), "你好！"], beam_size=3, n_best=2, attention=True, split_sentences=True
    )
    assert len(calls) == 1  # the sentences of both paragraphs in one search
    assert paragraph.sentences == sentences and other.sentences == ["你好！"]
    assert paragraph.text == " ".join(t.text for t in alone) and paragraph.text.count(" ") >= 2
    for mine, theirs in zip(paragraph.translations, alone, strict=True):  # per sentence
        assert mine.source_pieces == theirs.source_pieces
        assert [h.text for h in mine.hypotheses] == [h.text for h in theirs.hypotheses]
        assert len(mine.hypotheses) == 2
        for h, g in zip(mine.hypotheses, theirs.hypotheses, strict=True):
            assert h.attention.shape == g.attention.shape and np.allclose(h.attention, g.attention)
    assert other.text == alone[1].text


def test_a_paragraph_of_punctuation_alone_gets_an_empty_translation(trained_run):
    translator = Translator.load(trained_run / "best.pt")
    empty, filled = translator.translate(["。！？", "我很好。"], split_sentences=True)
    assert (empty.text, empty.sentences, empty.translations) == ("", [], [])
    assert not empty.truncated and filled.text == translator.translate(["我很好。"])[0].text


def test_without_splitting_a_paragraph_is_one_sentence(trained_run):
    translator = Translator.load(trained_run / "best.pt")
    (whole,) = translator.translate(["我很好。你好！"])
    assert whole.source_pieces.count("。") == 1 and whole.hypotheses  # a Translation, as before


def test_attnmt_translate_split_sentences_takes_a_paragraph_a_line(trained_run, tmp_path):
    npz = tmp_path / "att.npz"
    lines = ["我很好。你好！他走了。", "。！？", "你好！"]
    stdin = "\n".join(lines).encode()
    flags = ["split_sentences=true", "beam_size=3"]
    result = translate(trained_run, *flags, "alignment=hard", f"attention={npz}", stdin=stdin)
    assert result.returncode == 0, result.stderr
    out = [line.split(" ||| ") for line in result.stdout.decode().splitlines()]
    translator = Translator.load(trained_run / "best.pt")
    expected = translator.translate(lines, beam_size=3, split_sentences=True)
    assert [row[0] for row in out] == [p.text for p in expected] and out[1][0] == ""
    assert [len(row) - 1 for row in out] == [3, 1, 1]  # links per sentence; ' ||| ' for none
    assert {"attention_0_0", "attention_0_2", "attention_2_0"} <= set(np.load(npz))
    nbest = translate(trained_run, *flags, "n_best=2", stdin=stdin)
    rows = [line.split(" ||| ")[:2] for line in nbest.stdout.decode().splitlines()]
    assert rows == [["0", "0"]] * 2 + [["0", "1"]] * 2 + [["0", "2"]] * 2 + [["2", "0"]] * 2
    whole = translate(trained_run, "beam_size=3", stdin=stdin)  # off: a line is one sentence
    assert whole.stdout.decode().splitlines() == [
        t.text for t in translator.translate(lines, beam_size=3)
    ]
