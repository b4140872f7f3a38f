"""What stands between the network and the app: a token check and a bounded body reader.

The token comes from `read_token` (token_file, else ATTNMT_SERVE_TOKEN); attnmt-serve
refuses a host beyond loopback (`is_loopback`) without one unless public=true. Both guards are
plain ASGI middleware, so they act before FastAPI reads or parses anything:

- `RequireToken`: with a token set, every path but the page, its assets and the docs needs
  `Authorization: Bearer TOKEN` (compared in constant time); 401 otherwise.
- `BodyLimit`: a `Content-Length` over the limit is refused with 413 before any of the body is
  read; a chunked body is counted as it arrives and refused as soon as it passes the limit; a
  body that takes longer than `timeout_s` gets 408. The app then gets the body in one piece.

Every refusal closes the connection (`Connection: close`), so uvicorn reads nothing more of a
body nobody wants.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from attnmt.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# What a browser needs to load the page and the docs, before it has asked for the token.
PUBLIC_PATHS = ("/", "/docs", "/openapi.json", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)

TOKEN_VARIABLE = "ATTNMT_SERVE_TOKEN"
MIN_TOKEN_LENGTH = 16


def read_token(token_file: str | None) -> str | None:
    """The token every /v1 request must carry: `token_file`'s first line, else the
    environment's ATTNMT_SERVE_TOKEN; None where neither is set."""
    if token_file is not None:
        key, path = "token_file", Path(token_file)
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"token_file={path}: cannot read it ({error})") from None
    else:
        key, token = TOKEN_VARIABLE, os.environ.get(TOKEN_VARIABLE)
        if token is None:
            return None
    if len(token) < MIN_TOKEN_LENGTH or not token.isascii() or not token.isprintable():
        raise ConfigError(
            f"{key}: the token must be at least {MIN_TOKEN_LENGTH} printable ASCII characters "
            "on one line (python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    return token


def is_loopback(host: str) -> bool:
    """Whether `host` serves this machine only (a name other than localhost counts as not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def header(scope: Scope, name: bytes) -> bytes | None:
    """The value of request header `name` (lower case), or None."""
    return next((value for key, value in scope["headers"] if key == name), None)


async def refuse(
    send: Send, status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """Answer {"error": message} with `status`, and close the connection after it."""
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RequireToken:
    """Lets through only requests that carry `token` (the page, its assets and docs excepted)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.public(scope["path"]) and not self.allowed(scope):
            await refuse(
                send,
                401,
                "Authorization: this service needs 'Authorization: Bearer TOKEN'",
                ((b"www-authenticate", b"Bearer"),),
            )
            return
        await self.app(scope, receive, send)

    @staticmethod
    def public(path: str) -> bool:
        return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)

    def allowed(self, scope: Scope) -> bool:
        """Whether the request's bearer token is ours; the comparison takes the same time
        wherever the two first differ."""
        scheme, _, given = (header(scope, b"authorization") or b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)


class BodyTooLarge(Exception):
    """The body passed the limit while it was being read."""


class ClientGone(Exception):
    """The client disconnected before its body was complete."""


class BodyLimit:
    """Reads each request body up to `max_bytes` within `timeout_s`, refusing the rest."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None and int(declared) > self.max_bytes:  # (h11 checked it's a number)
            await refuse(send, 413, f"body: {int(declared):,} bytes; at most {self.max_bytes:,}")
            return
        try:
            body = await asyncio.wait_for(self.read(receive), self.timeout_s)
        except BodyTooLarge:
            await refuse(send, 413, f"body: over the limit of {self.max_bytes:,} bytes")
            return
        except asyncio.TimeoutError:
            await refuse(send, 408, f"body: not complete within {self.timeout_s:g} s")
            return
        except ClientGone:
            return
        await self.app(scope, replay(body, receive), send)

    async def read(self, receive: Receive) -> bytes:
        """The whole body, counted chunk by chunk as uvicorn hands it over."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then whatever the client does next."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
