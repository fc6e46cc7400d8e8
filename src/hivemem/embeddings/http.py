"""An OpenAI-compatible `POST <base_url>/embeddings` (docs/embeddings.md): Ollama, llama.cpp server, LM Studio, vendors.

Only `embeddings.api_key` is ever sent as a credential; nothing else (no environment variable, no file) is read.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from http.client import HTTPMessage

from hivemem.config import check_embeddings_url
from hivemem.embeddings.base import EmbeddingError, Settings, unit_vectors

MAX_REPLY = 64 << 20  # bytes read from a reply at most: 32 vectors of 65,536 floats fit


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Every 3xx is an error: a redirect would carry memory text and the `Authorization` header to a host the
    config never named, plain http included (docs/security.md)."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage,
                         newurl: str) -> None:  # fmt: skip
        return None


class HttpProvider:
    def __init__(self, settings: Settings) -> None:
        check_embeddings_url(settings.base_url)
        self.url = settings.base_url.rstrip("/") + "/embeddings"
        self.model = settings.model
        self.dimensions = settings.dimensions
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if settings.api_key:
            self.headers["Authorization"] = f"Bearer {settings.api_key}"
        # No proxy from the environment: memory text goes to the configured host and nowhere else.
        # No redirect followed, to any host.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

    def embed(self, texts: Sequence[str], *, query: bool, timeout: float) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": list(texts)}).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        try:
            with self.opener.open(request, timeout=timeout) as response:
                raw = response.read(MAX_REPLY + 1)
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise EmbeddingError(f"the endpoint answered HTTP {exc.code} (a redirect, never followed: set "
                                     "embeddings.base_url to the address that answers)") from None  # fmt: skip
            raise EmbeddingError(f"the endpoint answered HTTP {exc.code}") from None
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            raise EmbeddingError(f"the endpoint is unreachable or timed out: {exc}") from None
        if len(raw) > MAX_REPLY:
            raise EmbeddingError("the endpoint's reply is too large")
        return unit_vectors(parse(raw, len(texts)), len(texts), self.dimensions)


def parse(raw: bytes, count: int) -> list[list[float]]:
    """The vectors of `{"data": [{"index": i, "embedding": [...]}]}` in input order."""
    try:
        doc: object = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise EmbeddingError("the endpoint's reply is not JSON") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise EmbeddingError(f"the endpoint's reply has no data list of {count} items")
    out: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if type(index) is not int or not 0 <= index < count or out[index] is not None or not isinstance(vector, list):
            raise EmbeddingError("the endpoint's reply has a malformed data item")
        out[index] = vector
    return [v for v in out if v is not None]
