"""hivemem's own credential store and what the plugins run: `client add --save`, `mcp --client`, `hook --client`,
`--requires` (docs/plugins.md, docs/decisions.md D310-D312). Real CLI processes, a real daemon, real MCP sessions."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from conftest import Home, fails
from hivemem import __version__
from hivemem.mcp.tools import EXPOSED

GRANTS = '[{"right":"read","scope":"*"},{"right":"write","scope":"*"}]'


def credential_file(home: Home) -> Path:
    return Path(home.env["XDG_CONFIG_HOME"]) / "hivemem" / "credentials.json"


def save(home: Home, name: str = "claude-code", grants: str = GRANTS) -> dict[str, Any]:
    result: dict[str, Any] = home.ok("client", "add", "--name", name, "--grants", grants, "--save")
    return result


def tool_for(verb: str) -> str:
    """The MCP tool that serves `verb`, by the server's own table (tool names are the server's to choose)."""
    return next(name for name, v in EXPOSED.items() if v.name == verb)


@asynccontextmanager
async def session(home: Home, client: str) -> AsyncIterator[ClientSession]:
    """A real MCP client session with `hivemem mcp --client CLIENT`, no HIVEMEM_TOKEN in its environment."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "hivemem", "mcp", "--client", client],
                                   env=dict(home.env), cwd=home.base)  # fmt: skip
    with open(os.path.join(home.base, "mcp-stderr.log"), "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s


def hook(home: Home, event: str, body: dict[str, Any], *args: str) -> tuple[int, str]:
    result = home.cli("hook", event, *args, stdin=json.dumps(body), token=None)
    assert result.err == "", result
    return result.code, result.out


def refused_at_session_start(home: Home, client: str) -> None:
    """A hook whose credential file is refused tells the person why, logs denied.path, and exits 0."""
    code, out = hook(home, "session-start", {"cwd": home.base}, "--client", client)
    assert code == 0
    assert "hivemem will not use it" in json.loads(out)["systemMessage"]
    assert hook_log(home)[-1]["reason"].startswith("denied.path")


def hook_log(home: Home) -> list[dict[str, Any]]:
    path = Path(home.paths.logs) / "hooks.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_client_add_save_keeps_the_token_0600_and_does_not_print_it(home: Home) -> None:
    result = save(home)
    path = credential_file(home)
    assert result["saved"] == str(path) and "token" not in result
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    document = json.loads(path.read_text())
    token = document["clients"]["claude-code"]
    assert token.startswith("hm1.g")
    assert home.ok("whoami", token=token)["label"] == "claude-code"
    # The executable recorded beside it is this installation's hivemem, for the plugins' command lines.
    recorded = (path.parent / "executable").read_text().strip()
    assert result["executable"] == str(path.parent / "executable")
    assert os.path.isabs(recorded) and os.access(recorded, os.X_OK)
    # A second client joins the file; the first token stays.
    save(home, "codex")
    clients = json.loads(path.read_text())["clients"]
    assert set(clients) == {"claude-code", "codex"} and clients["claude-code"] == token


def test_mcp_client_connects_with_the_saved_token(home: Home) -> None:
    principal = save(home)["principal"]
    add = tool_for("memory.add")

    async def main() -> None:
        async with session(home, "claude-code") as s:
            listed = {t.name for t in (await s.list_tools()).tools}
            assert add in listed
            result = await s.call_tool(add, {"space": "user", "content": "the plugin stores through its own token"})
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            memory_id = result.structured_content["id"]
        got = home.ok("memory", "get", "--id", memory_id)
        assert got["author"] == {"principal": principal, "label": "claude-code"}

    anyio.run(main)


def test_mcp_without_a_saved_token_serves_and_says_the_command_to_run(home: Home) -> None:
    home.ok("whoami")

    async def main() -> None:
        async with session(home, "codex") as s:
            tools = (await s.list_tools()).tools
            assert tools, "the server starts and lists its tools, so the harness shows it connected"
            result = await s.call_tool(tools[0].name, {})
            assert result.is_error and result.structured_content is None
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            wire = json.loads(block.text)  # a tool error is `{code, message, data}` as text (docs/mcp.md)
            assert wire["code"] == "failed.no_token"
            assert "client add --name codex" in wire["data"]["fix"] and "--save" in wire["data"]["fix"]

    anyio.run(main)


def test_hook_client_recalls_with_that_clients_grants(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "protobuf schemas live in the proto directory")
    body = {"cwd": home.base, "prompt": "where do the protobuf schemas live"}
    code, out = hook(home, "prompt-submit", body)
    assert code == 0 and "protobuf schemas" in out  # unknown reads every space by default
    save(home, "claude-code", '[{"right":"read","scope":"space:project/*"}]')
    code, out = hook(home, "prompt-submit", body, "--client", "claude-code")
    assert (code, out) == (0, ""), "the saved token's grants apply: it cannot read `user`"
    save(home, "codex")
    code, out = hook(home, "prompt-submit", body, "--harness", "codex", "--client", "codex")
    assert code == 0 and "protobuf schemas" in json.loads(out)["hookSpecificOutput"]["additionalContext"]


def test_hook_without_a_saved_token_tells_the_person_once_and_never_blocks(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "protobuf schemas live in the proto directory")
    code, out = hook(home, "session-start", {"cwd": home.base}, "--client", "claude-code")
    assert code == 0
    message = json.loads(out)
    assert list(message) == ["systemMessage"]
    assert "hivemem client add --name claude-code" in message["systemMessage"]
    assert "--save" in message["systemMessage"]
    code, out = hook(home, "prompt-submit", {"cwd": home.base, "prompt": "protobuf schemas"}, "--client", "claude-code")
    assert (code, out) == (0, "")
    assert [e["reason"].split(":")[0] for e in hook_log(home)] == ["failed.no_token", "failed.no_token"]


def test_requires_refuses_an_older_hivemem_with_the_fix(home: Home) -> None:
    assert home.cli("--requires", __version__, "--version", token=None).out.strip() == f"hivemem {__version__}"
    assert home.cli("--requires=0.0.1", "--version", token=None).code == 0
    error = fails(home, "--requires", "99.0", "whoami", code="unsupported.version", exit_code=10)
    assert error["data"]["needed"] == "99.0" and error["data"]["found"] == __version__
    assert "upgrade" in error["data"]["fix"]
    fails(home, "--requires", "soon", "whoami", code="invalid_params.usage", exit_code=2)


def test_requires_on_a_hook_is_a_message_and_exit_0(home: Home) -> None:
    for wanted in ("99.0", "soon"):
        result = home.cli("--requires", wanted, "hook", "prompt-submit", stdin="{}", token=None)
        assert result.code == 0, result
        assert list(json.loads(result.out)) == ["systemMessage"]
    assert "99.0" in home.cli("--requires", "99.0", "hook", "session-start", stdin="{}", token=None).out


def test_a_bad_client_name_is_refused(home: Home) -> None:
    result = home.cli("mcp", "--client", "../x", token=None)
    assert result.code == 2 and "invalid_params.range" in result.err


# Each attack on the credential file is refused with denied.path; the file is never read through or replaced.


def test_credentials_symlink_is_refused(home: Home) -> None:
    save(home)
    path = credential_file(home)
    elsewhere = Path(home.base) / "planted.json"
    elsewhere.write_text(json.dumps({"clients": {"codex": "hm1.g9.planted"}}))
    os.chmod(elsewhere, 0o600)
    path.unlink()
    path.symlink_to(elsewhere)
    error = fails(home, "client", "add", "--name", "codex", "--grants", GRANTS, "--save", code="denied.path",
                  exit_code=4)  # fmt: skip
    assert error["data"]["path"] == str(path)
    assert [c["name"] for c in home.ok("client", "list")["clients"]] == ["claude-code"], "no client was made"
    assert json.loads(elsewhere.read_text()) == {"clients": {"codex": "hm1.g9.planted"}}
    refused_at_session_start(home, "codex")


def test_credentials_fifo_is_refused_without_hanging(home: Home) -> None:
    path = credential_file(home)
    path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.mkfifo(path, 0o600)
    fails(home, "client", "add", "--name", "codex", "--grants", GRANTS, "--save", code="denied.path", exit_code=4)
    refused_at_session_start(home, "codex")


def test_credentials_readable_by_others_is_refused(home: Home) -> None:
    save(home)
    path = credential_file(home)
    os.chmod(path, 0o644)
    error = fails(home, "client", "add", "--name", "codex", "--grants", GRANTS, "--save", code="denied.path",
                  exit_code=4)  # fmt: skip
    assert "chmod 600" in error["data"]["fix"]
    refused_at_session_start(home, "claude-code")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644, "hivemem never chmods what it refuses"


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_credentials_of_another_user_are_refused(home: Home) -> None:
    save(home)
    path = credential_file(home)
    os.chown(path, 4242, 4242)
    fails(home, "client", "add", "--name", "codex", "--grants", GRANTS, "--save", code="denied.path", exit_code=4)
    refused_at_session_start(home, "claude-code")


def test_client_add_help_names_save(home: Home) -> None:
    result = home.cli("client", "add", "--help", token=None)
    assert result.code == 0 and "--save" in result.out and "credentials.json" in result.out


def test_client_remove_drops_the_saved_token(home: Home) -> None:
    save(home, "claude-code")
    save(home, "codex")
    home.ok("client", "remove", "--name", "claude-code")
    assert set(json.loads(credential_file(home).read_text())["clients"]) == {"codex"}
    assert stat.S_IMODE(credential_file(home).stat().st_mode) == 0o600
    code, out = hook(home, "session-start", {"cwd": home.base}, "--client", "claude-code")
    assert code == 0 and "client add --name claude-code" in json.loads(out)["systemMessage"]
