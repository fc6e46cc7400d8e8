"""`hivemem mcp` through MCP clients nobody here wrote: the MCP Inspector CLI (the TypeScript SDK, which checks
structured content against a tool's output schema), Claude Code and Codex, as pinned in tests/clients/package.json.
No model is called."""

from __future__ import annotations

import json
import os
import random
import re
import string
import subprocess
import sys
from typing import Any

from conftest import Home, node_client
from hivemem.manifest import TRUST_SENTENCE
from hivemem.mcp.tools import DEFAULT
from test_plugins import Harness

# A GitHub token shape the secret scan refuses (random enough for its entropy floor), made here so that the
# repository holds no secret-shaped literal.
SECRET = "token ghp_" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=36))


def inspector(home: Home, *args: str, token: str = "@owner") -> subprocess.CompletedProcess[str]:
    """`mcp-inspector --cli python -m hivemem mcp ARGS` in this home, as a user would run it."""
    env = {**home.env, "HIVEMEM_TOKEN": token}
    argv = [node_client("mcp-inspector"), "--cli", sys.executable, "-m", "hivemem", "mcp", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=home.base, timeout=120, check=False)


def inspector_call(home: Home, tool: str, **arguments: Any) -> dict[str, Any]:
    """One `tools/call` through the Inspector CLI; its printed result."""
    pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
    proc = inspector(home, "--method", "tools/call", "--tool-name", tool, *(["--tool-arg", *pairs] if pairs else []))
    assert proc.returncode == 0, (tool, proc.stdout, proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def inspector_error(home: Home, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool error as the Inspector CLI shows it: `isError` and the `{code, message, data}` JSON in its text."""
    result = inspector_call(home, tool, **arguments)
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    (block,) = result["content"]
    wire: dict[str, Any] = json.loads(block["text"])
    assert set(wire) == {"code", "message", "data"}, wire
    return wire


def test_item1_the_inspector_cli_shows_each_error_code(home: Home) -> None:
    """Before D270 the TypeScript SDK reported every tool error as `Structured content does not match the tool's
    output schema` (exit 1), because the error carried `{code, message, data}` as structured content."""
    assert inspector_call(home, "memory_add", space="user", content="one")["structuredContent"]["id"] == "m1"
    stale = inspector_error(home, "memory_update", id="m1", revision=7, content="two")
    assert stale["code"] == "conflict.memory_revision" and stale["data"]["current"] == 1
    secret = inspector_error(home, "memory_add", space="user", content=SECRET)
    assert secret["code"] == "invalid_params.secret_content" and SECRET not in json.dumps(secret)
    bad_kind = inspector_error(home, "memory_add", space="user", content="two", kind="rumour")
    assert bad_kind["code"] == "invalid_params.range" and bad_kind["data"]["param"] == "kind"
    assert inspector_error(home, "memory_get", id="m9")["code"] == "not_found.memory"
    assert home.ok("memory", "get", "--id", "m1")["content"] == "one"  # nothing was half-written
    assert [m["id"] for m in home.ok("memory", "list")["memories"]] == ["m1"]


def test_item2_the_inspector_cli_accepts_a_noticed_search_result_and_lists_the_default_tools(home: Home) -> None:
    """The TypeScript SDK checks structured content against the output schema: `notice` is declared, so a search
    result that leads with it is accepted as it is."""
    home.ok("memory", "add", "--space", "user", "--content", "Deploys go through make release")
    found = inspector_call(home, "memory_search", query="deploys")
    assert found.get("isError") is not True, found
    assert next(iter(found["structuredContent"])) == "notice"
    assert found["structuredContent"]["notice"] == TRUST_SENTENCE
    assert [h["id"] for h in found["structuredContent"]["results"]] == ["m1"]
    assert found["content"][0]["text"].startswith(TRUST_SENTENCE + "\n")
    listed = inspector(home, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tools"]] == list(DEFAULT)


def test_claude_mcp_list_shows_the_registered_server_connected(home: Home) -> None:
    """`claude mcp add` as docs/mcp.md says, then `claude mcp list`: Claude Code starts `hivemem mcp`, initializes
    it and lists its tools (no model is called)."""
    claude = Harness(home, "claude")
    hivemem = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "hivemem")
    claude.run("mcp", "add", "--scope", "user", "hivemem", "-e", "HIVEMEM_TOKEN=@owner", "--", hivemem, "mcp")
    listed = claude.run("mcp", "list", timeout=180)
    assert re.search(rf"^hivemem: {re.escape(hivemem)} mcp - ✔ Connected$", listed, re.M), listed
