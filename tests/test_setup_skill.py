"""`hivemem setup HARNESS` and `hivemem skill [install]`: exact snippets, a SKILL.md from the manifest (C01)."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from typing import Any

import anyio

from conftest import Home, Result, mcp_session, node_client
from hivemem.auth import KINDS
from hivemem.manifest import TRUST_SENTENCE, VERBS

# What `hivemem setup` names hivemem by: the script beside this interpreter, by absolute path.
HIVEMEM = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "hivemem")
CLIENT_ADD = (
    f"HIVEMEM_TOKEN=@owner {HIVEMEM} client add --name {{}} "
    """--grants '[{{"right":"read","scope":"*"}},{{"right":"write","scope":"*"}}]' --json"""
)


def run(home: Home, *args: str, user_home: str | None = None) -> Result:
    """`hivemem ARGS` with HOME pointed at `user_home` (default: an empty directory in the test home)."""
    env = {**home.env, "HOME": user_home or os.path.join(home.base, "user")}
    os.makedirs(env["HOME"], exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "hivemem", *args], capture_output=True, env=env, cwd=home.base,
                          timeout=60, check=False)  # fmt: skip
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def json_blocks(text: str) -> list[Any]:
    """Every top-level JSON object printed in `text` (a line `{` up to the matching line `}`)."""
    blocks = re.findall(r"^\{\n.*?^\}$", text, flags=re.M | re.S)
    return [json.loads(b) for b in blocks]


def hook_commands(config: dict[str, Any]) -> dict[str, list[str]]:
    return {
        event: [h["command"] for group in groups for h in group["hooks"]] for event, groups in config["hooks"].items()
    }


def test_setup_claude_code_prints_the_exact_snippets(home: Home) -> None:
    result = run(home, "setup", "claude-code")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert f"claude mcp add --scope user hivemem -e HIVEMEM_TOKEN=<token> -- {HIVEMEM} mcp" in lines
    assert CLIENT_ADD.format("claude-code") in lines
    assert f"{HIVEMEM} skill install" in lines
    assert "never in a committed project file" in result.out and "~/.claude/settings.json" in result.out
    (hooks,) = json_blocks(result.out)
    assert hook_commands(hooks) == {
        "SessionStart": [f"{HIVEMEM} hook session-start --harness claude-code"],
        "UserPromptSubmit": [f"{HIVEMEM} hook prompt-submit --harness claude-code"],
    }
    assert hooks["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"


def test_setup_codex_prints_the_exact_snippets(home: Home) -> None:
    result = run(home, "setup", "codex")
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert f"codex mcp add hivemem --env HIVEMEM_TOKEN=<token> -- {HIVEMEM} mcp" in lines
    assert CLIENT_ADD.format("codex") in lines
    assert "only after you review and trust them" in result.out
    (hooks,) = json_blocks(result.out)
    assert hook_commands(hooks) == {
        "SessionStart": [f"{HIVEMEM} hook session-start --harness codex"],
        "UserPromptSubmit": [f"{HIVEMEM} hook prompt-submit --harness codex"],
    }
    # Codex's SessionStart sources (its hook input schema): startup, resume, clear, compact and fork.
    # A matcher of letters and `|` is matched exactly against the source, so each must be listed.
    assert hooks["hooks"]["SessionStart"][0]["matcher"].split("|") == ["startup", "resume", "clear", "compact", "fork"]
    assert TRUST_SENTENCE in result.out  # the AGENTS.md paragraph


def test_setup_codex_and_the_hooks_doc_name_the_feature_flag_codex_lists(home: Home) -> None:
    """`hivemem setup codex` and docs/hooks.md name Codex's hooks feature flag as the real `codex features list`
    does (`hooks`, not the older `codex_hooks`)."""
    codex_home = os.path.join(home.base, "codex")
    os.makedirs(codex_home)
    env = {**home.env, "HOME": codex_home, "CODEX_HOME": codex_home}
    listed = subprocess.run([node_client("codex"), "features", "list"], capture_output=True, text=True, env=env,
                            timeout=60, check=True).stdout  # fmt: skip
    features = {line.split()[0]: line.split()[1:] for line in listed.splitlines() if line.strip()}
    flag = re.compile(r"\[features\] (\w+) = true")
    (said,) = flag.findall(run(home, "setup", "codex").out)
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "hooks.md"), encoding="utf-8") as f:
        (documented,) = flag.findall(f.read())
    assert said == documented == "hooks"
    assert features[said][0] == "stable", features.get(said)


def test_setup_opencode_prints_the_mcp_entry_and_an_agents_paragraph(home: Home) -> None:
    result = run(home, "setup", "opencode")
    assert result.code == 0, result
    (config,) = json_blocks(result.out)
    assert config == {
        "mcp": {"hivemem": {"type": "local", "command": [HIVEMEM, "mcp"], "environment": {"HIVEMEM_TOKEN": "<token>"}}}
    }
    assert CLIENT_ADD.format("opencode") in result.out.splitlines()
    assert "## Shared memory (hivemem)" in result.out and TRUST_SENTENCE in result.out
    assert "~/.config/opencode/opencode.json" in result.out


def registered_command(home: Home, harness: str) -> list[str]:
    """The server command `hivemem setup HARNESS` tells the harness to register (after `--`)."""
    (line,) = [x for x in run(home, "setup", harness).out.splitlines() if " mcp add " in x]
    words = shlex.split(line)
    return words[words.index("--") + 1 :]


def test_registered_command_connects_without_hivemem_on_path(home: Home) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = registered_command(home, "claude-code")
    assert command == registered_command(home, "codex") and os.path.isabs(command[0])
    env = {**home.env, "HIVEMEM_TOKEN": "@owner", "PATH": "/usr/bin:/bin"}  # as a harness might start it

    async def session() -> tuple[set[str], Any]:
        params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd="/")
        with open(os.path.join(home.base, "mcp-stderr.log"), "a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                return tools, await s.call_tool("memory_add", {"space": "user", "content": "from a harness"})

    tools, added = anyio.run(session)
    assert "memory_search" in tools
    assert not added.is_error and added.structured_content["id"] == "m1"
    assert home.ok("memory", "get", "--id", "m1")["author"]["principal"] == "owner"


def test_setup_edits_nothing_and_starts_no_daemon(home: Home) -> None:
    user = os.path.join(home.base, "user")
    for harness in ("claude-code", "codex", "opencode"):
        assert run(home, "setup", harness, user_home=user).code == 0
    assert os.listdir(user) == []
    assert home.daemon_pid() is None
    bad = run(home, "setup", "vim", "--json")
    assert bad.code == 2 and json.loads(bad.out)["error"]["code"] == "invalid_params.usage"


def test_skill_is_generated_from_the_manifest(home: Home) -> None:
    result = run(home, "skill")
    assert result.code == 0, result
    text = result.out
    front = re.match(r"---\nname: hivemem\ndescription: (?P<d>[^\n]+)\n---\n", text)
    assert front is not None and ": " not in front["d"]  # a plain YAML scalar
    assert TRUST_SENTENCE in text
    for kind in KINDS:
        assert f"| `{kind}` |" in text
    exposed = {v.name.replace(".", "_") for v in VERBS if v.mcp}
    listed = set(re.findall(r"^- `([a-z_]+)` \(CLI `hivemem [^`]+`\)", text, flags=re.M))
    assert listed == exposed
    mentioned = set(re.findall(r"`((?:memory|session|space|store|events)_[a-z_]+)`", text))
    assert mentioned <= exposed  # the guidance names no tool that does not exist
    for verb in VERBS:
        if not verb.mcp:
            assert f"`{verb.name.replace('.', '_')}`" not in text


def test_cli_mcp_and_skill_name_the_same_tools(home: Home) -> None:
    async def tools() -> set[str]:
        async with mcp_session(home) as s:
            return {t.name for t in (await s.list_tools()).tools}

    names = anyio.run(tools)
    text = run(home, "skill").out
    commands = dict(re.findall(r"^- `([a-z_]+)` \(CLI `hivemem ([^`]+)`\)", text, flags=re.M))
    assert set(commands) == names
    for name, command in commands.items():
        verb = next(v for v in VERBS if v.name.replace(".", "_") == name)
        assert command == verb.cli_name, f"the skill names {name}'s command as the manifest does"
        args = [*command.split(), "--help"]  # the command as the skill prints it
        assert run(home, *args).code == 0, args
    assert commands["memory_hygiene"] == "hygiene" and "`hivemem memory hygiene`" not in text


def test_skill_teaches_add_or_capture_and_the_lifecycle(home: Home) -> None:
    text = run(home, "skill").out
    sections = dict(re.findall(r"^## ([^\n]+)\n\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    choose = sections["Add or capture"]
    assert "`memory_add` when the user asked you to remember" in choose
    assert "`memory_capture` for what you inferred" in choose and "draft" in choose
    assert "never searched or recalled until a person" in choose
    assert "`duplicate_of`" in choose and "`exhaustive: false`" in choose and "`independent`" in choose
    life = sections["Lifecycle"].splitlines()
    assert [line.split(":")[0] for line in life if line.startswith("- ")][:3] == [
        "- capture -> confirm", "- challenge", "- review"]  # fmt: skip
    life_text = " ".join(life)
    for tool in ("memory_confirm", "memory_challenge", "memory_review", "memory_relate", "memory_audit"):
        assert f"`{tool}`" in life_text
    for outcome in ("still_valid", "needs_review", "stale", "wrong", "superseded"):
        assert f"`{outcome}`" in life_text
    assert "`confirm: true`" in life_text and "preview" in life_text


def test_skill_install_writes_under_home(home: Home) -> None:
    user = os.path.join(home.base, "user")
    result = run(home, "skill", "install", "--json", user_home=user)
    assert result.code == 0, result
    path = os.path.join(user, ".claude", "skills", "hivemem", "SKILL.md")
    assert json.loads(result.out) == {"path": path}
    with open(path, encoding="utf-8") as f:
        assert f.read().rstrip("\n") == run(home, "skill").out.rstrip("\n")
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o022 == 0
    again = run(home, "skill", "install", user_home=user)
    assert again.code == 0 and path in again.out
    assert sorted(os.listdir(os.path.dirname(path))) == ["SKILL.md"]
    assert home.daemon_pid() is None
