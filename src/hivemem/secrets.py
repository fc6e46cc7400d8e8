"""Secret detection for writes (SPEC 13). This first cut refuses hivemem's own tokens and keys."""

from __future__ import annotations

import re

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hivemem_token", re.compile(r"hm1\.(g[0-9]+|owner)\.[A-Za-z0-9_-]{43}")),
)


def find(text: str) -> str | None:
    """The kind of the first secret in `text`, or None. Never returns the secret itself."""
    for kind, pattern in RULES:
        if pattern.search(text):
            return kind
    return None
