"""What a harness hands a hook on stdin, and what the hook hands back (Claude Code and Codex share both)."""

from __future__ import annotations

import json
import os
import select
import time
from dataclasses import dataclass

MAX_INPUT = 1 << 20  # bytes of hook JSON; more is refused whole
MAX_PROMPT = 8192  # bytes of prompt sent as the recall query (memory.recall's bound)
EVENTS = {"session-start": "SessionStart", "prompt-submit": "UserPromptSubmit"}


class Refused(Exception):
    """Why a hook gives up: logged, never shown to the harness."""


@dataclass(frozen=True)
class HookInput:
    """The members of the harness's JSON a hook uses."""

    cwd: str
    prompt: str | None = None
    session_id: str | None = None


def read_stdin(fd: int, deadline: float) -> bytes:
    """All of stdin, bounded in size (1 MiB) and in time (the hook's deadline)."""
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise Refused("input: stdin was not closed within the time budget")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > MAX_INPUT:
            raise Refused("input: over 1 MiB")


def parse(raw: bytes, event: str) -> HookInput:
    """The hook JSON as a HookInput; anything malformed is refused."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Refused("input: not a JSON document") from None
    if not isinstance(doc, dict):
        raise Refused("input: not a JSON object")
    cwd = doc.get("cwd")
    cwd = os.getcwd() if cwd is None else cwd
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise Refused("input: cwd is not an existing absolute directory")
    session_id = doc.get("session_id")
    if session_id is not None and not isinstance(session_id, str):
        raise Refused("input: session_id is not a string")
    if event != "prompt-submit":
        return HookInput(cwd, None, session_id)
    prompt = doc.get("prompt")
    if not isinstance(prompt, str):
        raise Refused("input: prompt is missing or not a string")
    return HookInput(cwd, bounded(prompt), session_id)


def bounded(prompt: str) -> str:
    """The prompt's first MAX_PROMPT bytes at a character boundary, lone surrogates dropped."""
    return prompt.encode("utf-8", "ignore")[:MAX_PROMPT].decode("utf-8", "ignore")


def output(event: str, text: str) -> str:
    """The one line both harnesses read: `{"hookSpecificOutput": {hookEventName, additionalContext}}`."""
    payload = {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": text}}
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":"))


def system_message(text: str) -> str:
    """A message the harness shows the person (never the model), for a hook that cannot recall and must say why:
    no saved token, an older hivemem than the plugin needs (docs/plugins.md). Never blocks: no `decision`."""
    return json.dumps({"systemMessage": text}, ensure_ascii=True, separators=(",", ":"))
