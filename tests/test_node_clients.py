"""The real clients the integration tests drive are installed at the versions tests/clients/package.json pins."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import node_client

PINS = json.loads((Path(__file__).parent / "clients" / "package.json").read_text())["dependencies"]


@pytest.mark.parametrize(
    ("command", "package", "flag"),
    [("claude", "@anthropic-ai/claude-code", "--version"), ("codex", "@openai/codex", "--version")],
)
def test_pinned_client_runs_at_its_pinned_version(command: str, package: str, flag: str) -> None:
    out = subprocess.run([node_client(command), flag], capture_output=True, text=True, timeout=60, check=True).stdout
    assert PINS[package] in out, (command, out)
