"""Advice the CLI prints on stderr after a command succeeds; it never changes the result or the exit code."""

from __future__ import annotations

import json

from hivemem.config import load
from hivemem.spaces import on_read_path


def unrecalled_space(space: str) -> list[str]:
    """A warning when `space` is on no recall read path, so a typo such as `usr` does not go unnoticed."""
    team = load()["recall.team_spaces"]
    if on_read_path(space, team):
        return []
    return [
        f"space {space!r} is on no recall path: hooks and `memory recall` read @project, user and "
        "recall.team_spaces, so they never show it (`memory search` still finds it).\n"
        f"fix: store it in user or @project, or add {space!r} to recall.team_spaces "
        f"(HIVEMEM_TOKEN=@owner hivemem config set --key recall.team_spaces --value '{json.dumps([*team, space])}')"
    ]
