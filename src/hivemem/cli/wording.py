"""How help text names things: commands as people type them, summaries cut to a line."""

from __future__ import annotations


def first_sentence(summary: str) -> str:
    head, dot, _ = summary.partition(". ")
    return typed(head + "." if dot else summary)


def typed(text: str) -> str:
    """Verb names as people type them: `memory.capture` → `hivemem memory capture` (help never says the wire
    name of a command)."""
    import re

    from hivemem.manifest import BY_NAME

    def named(found: re.Match[str]) -> str:
        verb = BY_NAME.get(found.group(1))
        return f"`hivemem {verb.cli_name}`" if verb is not None else found.group(0)

    return re.sub(r"`?\b([a-z]+\.[a-z_]+)\b`?", named, text)


def summary_line(summary: str) -> str:
    """A command's summary for a listing: its first sentence, the shared sentences (untrusted data, refused
    credentials) left for the end of the listing, said once."""
    from hivemem.manifest import SECRET_SENTENCE, TRUST_SENTENCE

    return first_sentence(summary.replace(TRUST_SENTENCE, "").replace(SECRET_SENTENCE, "").strip())
