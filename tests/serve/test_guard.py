"""attnmt-serve under abuse, against a real uvicorn (a test client would skip its reader):
oversized bodies, silent and slow clients, a flood past max_queue, requests without the token."""

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.serve.conftest import SERVE, Service, request

TOKEN = "test-token-0123456789abcdef"
HUGE = 200 * 1024 * 1024  # bytes


@pytest.fixture(scope="module")
def guarded(trained_run):
    """A service with a token, a 1 s read deadline and a small queue: 4 sentences a request,
    8 waiting at most."""
    running = Service(
        trained_run / "best.pt",
        "threads=1",
        "read_timeout_s=1",
        "max_sentences=4",
        "max_queue=8",
        "max_batch_sentences=4",
        "max_wait_ms=0",
        token=TOKEN,
    )
    yield running
    running.stop()


def connect(service: Service) -> socket.socket:
    return socket.create_connection(("127.0.0.1", service.port), timeout=10)


def read_all(client: socket.socket) -> str:
    """What the service sends until it closes the connection."""
    received = b""
    while chunk := client.recv(4096):
        received += chunk
    return received.decode()


def head(length: str | None, token: str = TOKEN) -> bytes:
    """The headers of a POST /v1/translate, with its Content-Length or chunked."""
    framing = f"Content-Length: {length}" if length else "Transfer-Encoding: chunked"
    return (
        f"POST /v1/translate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def send_huge_body(service: Service, chunked: bool) -> tuple[int, str]:
    """Send 200 MB of body (as far as the service lets it in); (bytes sent, what came back)."""
    sent = 0
    with connect(service) as client:
        client.sendall(head(None if chunked else str(HUGE)))
        piece = b'["' + b"x" * 65_530 + b'"]'
        try:
            while sent < HUGE:
                client.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
        except OSError:  # closed while still sending: the service refused the rest
            pass
        try:
            answer = client.recv(4096).decode(errors="replace")
        except OSError:
            answer = ""
    return sent, answer


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_200_mb_body_is_refused_before_it_is_read(guarded, chunked):
    Path(f"/proc/{guarded.process.pid}/clear_refs").write_text("5")  # peak RSS := RSS now
    before = guarded.rss_mb(peak=True)
    sent, answer = send_huge_body(guarded, chunked)
    assert sent < HUGE, "the service read all 200 MB"
    assert answer == "" or answer.startswith("HTTP/1.1 413"), answer
    if answer:
        assert "body:" in json.loads(answer.split("\r\n\r\n", 1)[1])["error"]
    assert guarded.rss_mb(peak=True) - before < 50
    assert guarded.translate({"text": ["我很好。"]})[0] == 200


def test_a_declared_length_over_the_limit_gets_413_before_any_body(guarded):
    with connect(guarded) as client:
        client.sendall(head("113537"))  # max_body_bytes for 4 x 1000 characters, plus one
        answer = read_all(client)
    assert answer.startswith("HTTP/1.1 413") and "connection: close" in answer.lower()
    assert "113,537 bytes; at most 113,536" in answer


@pytest.mark.parametrize(
    "opening", [b"", b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nX-Slow: "], ids=["silent", "slow"]
)
def test_a_client_that_never_completes_its_headers_is_dropped(guarded, opening):
    start = time.monotonic()
    with connect(guarded) as client:
        client.sendall(opening)
        assert client.recv(4096) == b""  # closed, with no answer
    assert 0.9 < time.monotonic() - start < 5


def test_a_body_that_never_completes_gets_408(guarded):
    with connect(guarded) as client:
        client.sendall(head("100") + b'{"text": ')
        answer = read_all(client)
    assert answer.startswith("HTTP/1.1 408") and "body: not complete within 1 s" in answer


def post_with_headers(service: Service, body: dict) -> tuple[int, str | None, dict]:
    """(status, Retry-After, JSON answer) of one POST /v1/translate."""
    call = urllib.request.Request(
        service.url + "/v1/translate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    try:
        with urllib.request.urlopen(call, timeout=60) as response:
            return response.status, response.headers.get("Retry-After"), json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Retry-After"), json.load(error)


def test_past_max_queue_503_with_retry_after_and_the_service_recovers(guarded):
    body = {"text": ["我们明天去公园，他昨天没有来上班。" * 6] * 4, "beam_size": 16}
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda _: post_with_headers(guarded, body), range(32)))
    statuses = sorted(status for status, _, _ in answers)
    assert set(statuses) == {200, 503} and statuses.count(200) >= 3, statuses
    for status, retry_after, answer in answers:
        if status == 503:
            assert retry_after == "1" and "max_queue=8" in answer["error"]
        else:
            assert len(answer["translations"]) == 4
    # and after the flood, good requests as before
    assert guarded.translate({"text": ["我很好。"]})[0] == 200


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-0123456789abc", TOKEN])
def test_without_the_token_v1_gets_401(guarded, authorization):
    headers = "" if authorization is None else f"Authorization: {authorization}\r\n"
    with connect(guarded) as client:
        client.sendall(f"GET /v1/health HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        answer = read_all(client)
    assert answer.startswith("HTTP/1.1 401") and "www-authenticate: bearer" in answer.lower()
    assert TOKEN not in answer


def test_with_the_token_v1_answers_and_the_page_needs_none(guarded):
    assert request(guarded.url + "/v1/health", token=TOKEN)[0] == 200
    assert request(guarded.url + "/v1/health", token=TOKEN.upper())[0] == 401
    assert guarded.translate({"text": ["我很好。"]})[0] == 200
    assert request(guarded.url + "/")[0] == 200
    assert request(guarded.url + "/static/app.js")[0] == 200
    assert TOKEN not in "".join(guarded.log)


def test_a_host_beyond_loopback_without_a_token_is_refused(tmp_path):
    result = subprocess.run(
        [SERVE, f"ckpt={tmp_path / 'x.pt'}", "host=0.0.0.0"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: host=0.0.0.0 serves beyond this machine")
    assert len(result.stderr.strip().splitlines()) == 1


def serve_options(*arguments: str):
    from attnmt.cli.common import tool_config
    from attnmt.cli.serve import ServeOptions

    return tool_config("serve", ["ckpt=x.pt", *arguments], ServeOptions)


def test_a_token_file_or_public_lets_a_host_beyond_loopback_serve(tmp_path, monkeypatch):
    from attnmt.errors import ConfigError

    monkeypatch.delenv("ATTNMT_SERVE_TOKEN", raising=False)
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    assert serve_options("host=0.0.0.0", f"token_file={path}").token() == TOKEN
    assert serve_options("host=0.0.0.0", "public=true").token() is None
    assert serve_options("host=::1").token() is None
    monkeypatch.setenv("ATTNMT_SERVE_TOKEN", TOKEN)
    assert serve_options("host=0.0.0.0").token() == TOKEN
    path.write_text("short\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="token_file: the token must be at least 16"):
        serve_options(f"token_file={path}")
    with pytest.raises(ConfigError, match="token_file=.*nowhere: cannot read it"):
        serve_options(f"token_file={tmp_path / 'nowhere'}")
    with pytest.raises(ConfigError, match=r"max_queue=31: must be at least max_sentences \(32\)"):
        serve_options("max_queue=31")
