"""The harness plugins and their marketplaces, generated: `python -m hivemem.cli.reference docs` writes them.

One plugin tree, `plugins/hivemem/`, with a manifest per harness (docs/plugins.md, docs/decisions.md D311):
Claude Code reads `.claude-plugin/plugin.json`, `.mcp.json`, `hooks/hooks.json` and `skills/`; Codex reads
`.codex-plugin/plugin.json`, which points at `codex/mcp.json`, `codex/hooks.json` and the same `skills/`. The
MCP server and hook entries differ only in the harness they name, so each harness has its own files, and no
entry relies on a harness's variables (Codex does not expand `${CLAUDE_PLUGIN_ROOT}`). Every command is a POSIX
shell line that runs the installed `hivemem`: the one recorded beside the config (`hivemem client add --save`
records it), else the one on PATH; the plugin bundles no copy. The marketplaces sit at the repository's root:
`.claude-plugin/marketplace.json` and `.agents/plugins/marketplace.json`.
"""

from __future__ import annotations

import json
import re
import shlex

from hivemem import __version__
from hivemem.errors import InvalidParams

NAME = "hivemem"
ROOT = f"plugins/{NAME}"
DESCRIPTION = (
    "Shared, local-first memory for agents: the hivemem MCP tools, recall at session start and for each prompt "
    "(read-only, fail-open), and the hivemem skill. Runs your installed hivemem; the token stays in hivemem's "
    "own credential store."
)
HARNESSES = {"claude-code": "Claude Code", "codex": "Codex"}
# What starts a session, per harness: both match the alternatives exactly (docs/hooks.md).
SESSION_SOURCES = {"claude-code": "startup|resume|clear|compact", "codex": "startup|resume|clear|compact|fork"}
RECORD = '"${XDG_CONFIG_HOME:-$HOME/.config}/hivemem/executable"'  # credentials.executable_path(), in shell
MISSING = "hivemem: no hivemem found on PATH, so nothing is recalled. Install hivemem, then see docs/plugins.md."


def version_tuple(version: str) -> tuple[int, ...]:
    """`0.1.0` as (0, 1, 0); a suffix after a number (`1.2.0rc1`) counts as that number."""
    parts = []
    for part in version.strip().split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            raise InvalidParams("usage", f"--requires {version[:40]!r}: not a version such as {__version__}")
        parts.append(int(digits.group()))
    return tuple(parts)


def new_enough(wanted: str) -> bool:
    """Whether this hivemem is at least version `wanted`."""
    have, need = version_tuple(__version__), version_tuple(wanted)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def shell_line(*args: str, hook: bool = False) -> str:
    """A POSIX shell line that runs the installed hivemem with `--requires VERSION ARGS`: the executable recorded
    beside the config if it is still there, else `hivemem` from PATH. A hook whose hivemem cannot be found says so
    as a message and exits 0, so it never stands in the harness's way."""
    find = f'x=$(cat {RECORD} 2>/dev/null); [ -x "$x" ] || x=$(command -v hivemem)'
    if hook:
        said = shlex.quote(json.dumps({"systemMessage": MISSING}))
        find += f" || {{ printf '%s\\n' {said}; exit 0; }}"
    else:
        find += " || x=hivemem"
    return f'{find}; exec "$x" {shlex.join(["--requires", __version__, *args])}'


def mcp_servers(harness: str) -> dict[str, object]:
    line = shell_line("mcp", "--client", harness)
    return {"mcpServers": {NAME: {"command": "sh", "args": ["-c", line]}}}


def hooks(harness: str) -> dict[str, object]:
    """Recall at session start and for each prompt, read-only and fail-open (docs/hooks.md)."""

    def handler(event: str) -> list[dict[str, object]]:
        line = shell_line("hook", event, "--harness", harness, "--client", harness, hook=True)
        return [{"type": "command", "command": line, "timeout": 10}]

    return {
        "description": "hivemem recall: memories for this repository and person, as untrusted data",
        "hooks": {
            "SessionStart": [{"matcher": SESSION_SOURCES[harness], "hooks": handler("session-start")}],
            "UserPromptSubmit": [{"hooks": handler("prompt-submit")}],
        },
    }


def claude_manifest() -> dict[str, object]:
    """`.claude-plugin/plugin.json`: `.mcp.json`, `hooks/hooks.json` and `skills/` are where Claude Code looks."""
    return {
        "name": NAME,
        "version": __version__,
        "description": DESCRIPTION,
        "author": {"name": "hivemem"},
        "license": "MIT",
        "keywords": ["memory", "mcp", "hooks", "recall", "agents"],
    }


def codex_manifest() -> dict[str, object]:
    """`.codex-plugin/plugin.json`: Codex's own MCP and hook files, the shared skill."""
    return {
        "name": NAME,
        "version": __version__,
        "description": DESCRIPTION,
        "author": {"name": "hivemem"},
        "license": "MIT",
        "keywords": ["memory", "mcp", "hooks", "recall", "agents"],
        "skills": "./skills/",
        "mcpServers": "./codex/mcp.json",
        "hooks": "./codex/hooks.json",
        "interface": {
            "displayName": "hivemem",
            "shortDescription": "Shared, local-first memory for agents",
            "developerName": "hivemem",
            "category": "Productivity",
            "capabilities": ["Read", "Write"],
        },
    }


def claude_marketplace() -> dict[str, object]:
    """`.claude-plugin/marketplace.json` at the repository's root."""
    return {
        "name": NAME,
        "owner": {"name": "hivemem"},
        "metadata": {"description": "hivemem's plugin for Claude Code", "version": __version__},
        "plugins": [{"name": NAME, "source": f"./{ROOT}", "description": DESCRIPTION, "version": __version__}],
    }


def codex_marketplace() -> dict[str, object]:
    """`.agents/plugins/marketplace.json` at the repository's root (Codex resolves `./` against the root)."""
    return {
        "name": NAME,
        "interface": {"displayName": "hivemem"},
        "plugins": [
            {
                "name": NAME,
                "source": {"source": "local", "path": f"./{ROOT}"},
                "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
                "category": "Productivity",
            }
        ],
    }


def _json(document: dict[str, object]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def files() -> dict[str, str]:
    """Every generated file, by its path from the repository's root."""
    from hivemem.cli import skill

    return {
        ".claude-plugin/marketplace.json": _json(claude_marketplace()),
        ".agents/plugins/marketplace.json": _json(codex_marketplace()),
        f"{ROOT}/.claude-plugin/plugin.json": _json(claude_manifest()),
        f"{ROOT}/.mcp.json": _json(mcp_servers("claude-code")),
        f"{ROOT}/hooks/hooks.json": _json(hooks("claude-code")),
        f"{ROOT}/.codex-plugin/plugin.json": _json(codex_manifest()),
        f"{ROOT}/codex/mcp.json": _json(mcp_servers("codex")),
        f"{ROOT}/codex/hooks.json": _json(hooks("codex")),
        f"{ROOT}/skills/{NAME}/SKILL.md": skill.render(),
    }
