"""A stub OpenAI-compatible embeddings endpoint on loopback: the one stand-in the tests allow.

It answers `POST /v1/embeddings` with vectors from `table` (exact input text -> vector), else a
deterministic word-hash vector of `width` numbers whose first component depends on the model, and records every
request. `mode` makes it misbehave: `hang` (holds the request until released), `500`, `nonjson`, `nan`,
`wrongdim`, `redirect` (answers `redirect_code` with `Location: redirect_to`).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Stub:
    def __init__(self, width: int = 8) -> None:
        self.width = width
        self.table: dict[str, list[float]] = {}
        self.mode = "ok"
        self.redirect_code = 302
        self.redirect_to = ""
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def vector(self, text: str, model: str) -> list[float]:
        if text in self.table:
            return self.table[text]
        out = [0.0] * self.width
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.sha256(word.encode()).digest()
            out[digest[0] % self.width] += 1.0
        out[0] += 0.5 if model.endswith("b") else 0.0
        return out if any(out) else [1.0] + [0.0] * (self.width - 1)

    def inputs(self) -> list[str]:
        with self.lock:
            return [text for r in self.requests for text in r["input"]]

    def models(self) -> set[str]:
        with self.lock:
            return {r["model"] for r in self.requests}

    def config(self, model: str = "stub-a", extra: str = "") -> str:
        return (
            f'[embeddings]\nprovider = "http"\nbase_url = "{self.base_url}"\nmodel = "{model}"\n'
            f"query_timeout_ms = 1000\nbatch_timeout_ms = 2000\n{extra}"
        )


def _misbehave(handler: Any, stub: Stub, mode: str) -> None:
    """The replies of the modes that send no vectors."""
    if mode == "hang":
        stub.release.wait(30)
    elif mode == "redirect":
        handler.send_response(stub.redirect_code)
        handler.send_header("Location", stub.redirect_to)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
    elif mode == "500":
        handler._send(500, b'{"error": "boom"}')
    else:
        handler._send(200, b"<html>not json</html>")


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            with stub.lock:
                stub.requests.append({**body, "path": self.path, "auth": self.headers.get("Authorization")})
            mode = stub.mode
            if mode in ("hang", "redirect", "500", "nonjson"):
                _misbehave(self, stub, mode)
                return
            data = []
            for i, text in enumerate(body["input"]):
                vector = stub.vector(text, body["model"])
                if mode == "nan":
                    vector = [float("nan")] * len(vector)
                elif mode == "wrongdim":
                    vector = vector[:-1]
                data.append({"index": i, "embedding": vector, "object": "embedding"})
            self._send(200, json.dumps({"data": data, "model": body["model"]}).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def running(width: int = 8) -> Iterator[Stub]:
    stub = Stub(width)
    stub.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    stub.server.daemon_threads = True
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.release.set()
        stub.server.shutdown()
        stub.server.server_close()
