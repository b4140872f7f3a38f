"""attnmt-serve over HTTP: answers, errors, dynamic batching without mix-ups, SIGTERM."""

import signal
import subprocess
import sysconfig
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from attnmt.infer.translate import Candidate, Translation, Translator
from attnmt.serve.app import translation_json
from tests.serve.conftest import Service, request

SENTENCES = ["我很好。", "你好！", "他走了。", "我们明天去公园。", "他昨天没有来上班。"]

BAD_REQUESTS = [
    (b'{"text": ["a"', 400, "malformed JSON"),
    (b"[1, 2]", 422, "body"),
    ({"text": "我很好。"}, 422, "text: Input should be a valid list"),
    ({"beam_size": 5}, 422, "text: Field required"),
    ({"text": []}, 422, "text: an empty list"),
    ({"text": ["好"] * 33}, 413, "text: 33 sentences; at most 32"),
    ({"text": ["好" * 1001]}, 413, "text[0]: 1001 characters; at most 1000"),
    ({"text": ["好"], "beam_size": 0}, 422, "beam_size: 0; must be 1 to 16"),
    ({"text": ["好"], "beam_size": 17}, 422, "beam_size: 17; must be 1 to 16"),
    ({"text": ["好"], "beam_size": "5"}, 422, "beam_size: Input should be a valid integer"),
    ({"text": ["好"], "beam_size": 2, "n_best": 3}, 422, "n_best: 3; must be 1 to beam_size"),
    ({"text": ["好"], "attention": "yes"}, 422, "attention: Input should be a valid boolean"),
    ({"text": [5]}, 422, "text.0: Input should be a valid string"),
    ({"text": ["好\x00"]}, 422, "text[0]: control characters"),
    (b'{"text": ["\\ud800"]}', 422, "text[0]: control characters or unpaired surrogates"),
    ({"text": ["好"], "ckpt": "/etc/passwd"}, 422, "ckpt: Extra inputs are not permitted"),
    ({"text": ["好"], "model": "/etc/passwd"}, 404, "model: no model '/etc/passwd'"),
    ({"text": ["好"], "split_sentences": "yes"}, 422, "split_sentences: Input should be a valid"),
    ({"text": ["好。" * 33], "split_sentences": True}, 413, "text: 33 sentences once split; at"),
    ({"text": ["好\n好"], "split_sentences": True}, 422, "text[0]: control characters"),
    (
        {"text": ["好。", "好" * 1001 + "。"], "split_sentences": True},
        413,
        "text[1]: sentence 1 has 1002 characters; at most 1000",
    ),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD_REQUESTS)
def test_a_bad_request_gets_its_status_and_a_json_error(service, body, status, message):
    answer = service.translate(body)
    assert answer[0] == status and message in answer[1]["error"], answer
    assert service.translate({"text": ["我很好。"]})[0] == 200  # and the service goes on


def test_health_says_the_languages_and_sizes(service):
    status, health = request(service.url + "/v1/health")
    assert status == 200 and (health["src_lang"], health["tgt_lang"]) == ("zh", "en")
    assert health["tgt_vocab"] == 250 and health["parameters"] > 0
    assert health["limits"]["max_sentences"] == 32


def test_the_page_its_assets_and_the_docs_are_served(service):
    status, page = request(service.url + "/")
    assert status == 200 and '<script src="/static/app.js">' in page
    assert "drawHeatmap" in request(service.url + "/static/app.js")[1]
    assert request(service.url + "/static/../../etc/passwd")[0] == 404
    assert request(service.url + "/docs")[0] == 200
    schema = request(service.url + "/openapi.json")[1]
    assert "/v1/translate" in schema["paths"]


def test_the_api_the_cli_and_the_service_translate_alike(service, trained_run):
    checkpoint = trained_run / "best.pt"
    api = [t.text for t in Translator.load(checkpoint).translate(SENTENCES, beam_size=3)]
    command = [
        str(Path(sysconfig.get_path("scripts")) / "attnmt-translate"),
        f"ckpt={checkpoint}",
        "beam_size=3",
        "device=cpu",
    ]
    cli = subprocess.run(
        command, input="\n".join(SENTENCES).encode(), capture_output=True, check=True
    )
    status, answer = service.translate({"text": SENTENCES, "beam_size": 3})
    assert status == 200
    assert [t["text"] for t in answer["translations"]] == api
    assert cli.stdout.decode().splitlines() == api


def test_attention_comes_back_target_by_source(service):
    status, answer = service.translate(
        {"text": ["我很好。"], "beam_size": 4, "n_best": 2, "attention": True}
    )
    assert status == 200
    (translation,) = answer["translations"]
    assert len(translation["hypotheses"]) == 2
    for hypothesis in translation["hypotheses"]:
        weights = hypothesis["attention"]
        assert len(weights) == len(hypothesis["target_pieces"])
        assert all(len(row) == len(translation["source_pieces"]) for row in weights)
        assert all(abs(sum(row) - 1) < 1e-2 for row in weights)


def test_concurrent_clients_each_get_their_own_translations(service, trained_run):
    expected = {
        s: t.text
        for s, t in zip(
            SENTENCES, Translator.load(trained_run / "best.pt").translate(SENTENCES), strict=True
        )
    }

    def client(number):
        mine = [SENTENCES[number % 5], SENTENCES[(number + 2) % 5]][: 1 + number % 2]
        answers = []
        for _ in range(4):
            status, answer = service.translate({"text": mine})
            assert status == 200
            answers.append(
                [t["text"] for t in answer["translations"]] == [expected[s] for s in mine]
            )
        return answers

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(client, range(16)))
    assert all(all(r) for r in results)


def test_sigterm_answers_the_requests_in_flight_then_exits(trained_run):
    # Requests wait up to 500 ms for company: SIGTERM arrives while they wait.
    service = Service(trained_run / "best.pt", "threads=1", "max_wait_ms=500")
    answers = []
    clients = [
        threading.Thread(target=lambda: answers.append(service.translate({"text": SENTENCES})))
        for _ in range(3)
    ]
    for client in clients:
        client.start()
    time.sleep(0.2)
    service.process.send_signal(signal.SIGTERM)
    for client in clients:
        client.join(timeout=60)
    assert service.process.wait(timeout=30) == 0
    assert [a[0] for a in answers] == [200, 200, 200]
    assert all(len(a[1]["translations"]) == len(SENTENCES) for a in answers)


def test_paragraphs_come_back_as_their_sentences_translated_and_joined(service, trained_run):
    lines = ["我很好。你好！他走了。", "。！？", "我们明天去公园。"]
    body = {"text": lines, "beam_size": 3, "n_best": 2, "attention": True, "split_sentences": True}
    status, answer = service.translate(body)
    assert status == 200
    expected = Translator.load(trained_run / "best.pt").translate(
        lines, beam_size=3, n_best=2, split_sentences=True
    )
    paragraphs = answer["translations"]
    assert [p["source"] for p in paragraphs] == lines
    assert [p["text"] for p in paragraphs] == [p.text for p in expected]
    assert [len(p["sentences"]) for p in paragraphs] == [3, 0, 1]
    assert paragraphs[1]["text"] == ""  # punctuation alone: an empty translation
    first = paragraphs[0]["sentences"]
    assert [s["source"] for s in first] == ["我很好。", "你好！", "他走了。"]
    assert [s["text"] for s in first] == [t.text for t in expected[0].translations]
    for sentence in first:  # n-best, attention and alignment per sentence
        assert len(sentence["hypotheses"]) == 2
        best = sentence["hypotheses"][0]
        assert len(best["attention"]) == len(best["target_pieces"])
        assert all(len(row) == len(sentence["source_pieces"]) for row in best["attention"])
        assert "alignment" in best
    # a paragraph past max_chars, of sentences within it, is split before it is counted
    long = "我" * 40 + "。"
    status, answer = service.translate(
        {"text": [long * 30], "beam_size": 1, "split_sentences": True}
    )
    assert status == 200 and len(answer["translations"][0]["sentences"]) == 30


def test_a_character_s_byte_pieces_come_back_as_the_character():
    source = ["▁我", "<0xE9>", "<0xBE>", "<0x98>", "</s>"]  # 龘 in byte pieces
    weights = np.array([[0.1, 0.2, 0.3, 0.3, 0.1], [0.0, 0.0, 0.0, 0.0, 1.0]])
    result = Translation(source, [Candidate("I dragon", -1.0, ["▁I", "</s>"], weights)])
    answer = translation_json("我龘", result, [[(1, 0), (2, 0), (3, 0)]])
    assert answer["source_pieces"] == ["▁我", "龘", "</s>"]
    (hypothesis,) = answer["hypotheses"]
    assert hypothesis["attention"] == [[0.1, 0.8, 0.1], [0.0, 0.0, 1.0]]
    assert hypothesis["alignment"] == [[1, 0]]
