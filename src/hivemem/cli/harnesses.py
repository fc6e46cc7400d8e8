"""`hivemem setup`: the exact snippets to paste for each harness. hivemem never edits agent settings itself."""

from __future__ import annotations

import json
import os
import shlex
import sys

from hivemem.manifest import TRUST_SENTENCE

GRANTS = '[{"right":"read","scope":"*"},{"right":"write","scope":"*"}]'
NAMES = {"claude-code": "Claude Code", "codex": "Codex", "opencode": "opencode"}

AGENTS_MD = f"""\
## Shared memory (hivemem)

You have the hivemem MCP tools (`memory_search`, `memory_get`, `memory_add`, `memory_update`, ...), a memory
store shared with other agents and sessions. Before answering about past work, decisions or conventions of this
repository, search it with `memory_search`. When the user asks you to remember something, or you learn a durable
fact, decision, convention, preference or lesson, store it with `memory_add` in space `@project` (this
repository) or `@user` (true of this person everywhere), with a fitting `kind`. To change a memory, pass the
`revision` you read to `memory_update`. {TRUST_SENTENCE}"""


# What starts a session, per harness (the hook's `source`). Codex also starts one for `codex fork`; both match
# the alternatives exactly, so a source missing here would get no recall.
SESSION_SOURCES = {"claude-code": "startup|resume|clear|compact", "codex": "startup|resume|clear|compact|fork"}


def executable() -> list[str]:
    """This installation of hivemem by absolute path, so a harness starts it whatever PATH it runs with."""
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "hivemem")
    if os.access(beside, os.X_OK):  # a virtual environment's or pipx's script, beside its interpreter
        return [beside]
    return [os.path.abspath(sys.executable), "-m", "hivemem"]


def command(*args: str) -> str:
    """A shell command line that runs this hivemem with `args`."""
    return shlex.join([*executable(), *args])


def client_add(name: str) -> str:
    """The owner's command that creates this harness's client token (shown once)."""
    return f"HIVEMEM_TOKEN=@owner {command('client', 'add', '--name', name, '--grants', GRANTS, '--json')}"


def hooks(harness: str) -> str:
    """Hook configuration: recall at session start and for each prompt, read-only and fail-open."""

    def handler(event: str) -> list[dict[str, object]]:
        line = command("hook", event, "--harness", harness)
        return [{"type": "command", "command": line, "timeout": 10}]

    config = {
        "hooks": {
            "SessionStart": [{"matcher": SESSION_SOURCES[harness], "hooks": handler("session-start")}],
            "UserPromptSubmit": [{"hooks": handler("prompt-submit")}],
        }
    }
    return json.dumps(config, indent=2)


def opencode_mcp() -> str:
    entry = {"type": "local", "command": [*executable(), "mcp"], "environment": {"HIVEMEM_TOKEN": "<token>"}}
    return json.dumps({"mcp": {"hivemem": entry}}, indent=2)


# The plugin's two commands per harness (docs/plugins.md), run in a clone of hivemem's repository or with its URL.
PLUGIN = {
    "claude-code": ("claude plugin marketplace add ./", "claude plugin install hivemem@hivemem"),
    "codex": ("codex plugin marketplace add ./", "codex plugin add hivemem@hivemem"),
}


def plugin_note(harness: str) -> list[str]:
    """Where a harness has plugins, say so first: one install gives the MCP server, both hooks and the skill."""
    if harness not in PLUGIN:
        return []
    return [
        f"{NAMES[harness]} can install all of this as a plugin instead (docs/plugins.md): save a token once, then",
        "run the two plugin commands in a clone of hivemem's repository (or give its URL instead of ./):",
        "",
        client_add(harness).replace(" --json", " --save"),
        *PLUGIN[harness],
        "",
        "Or paste the snippets below by hand.",
        "",
    ]


def _header(harness: str) -> list[str]:
    return [
        f"hivemem setup for {NAMES[harness]}. hivemem never edits agent settings: paste these yourself.",
        "Register in your user config, never in a committed project file: the token is a credential.",
        "",
        *plugin_note(harness),
        f"1. Create a client token for {NAMES[harness]} (once; it is shown only now):",
        "",
        client_add(harness),
        "",
    ]


def _footer() -> list[str]:
    return [
        "",
        f"These commands start hivemem by its absolute path ({command()}), so they work whatever PATH the",
        "harness runs with. Run `hivemem setup` again after moving or reinstalling hivemem.",
        "More: docs/mcp.md (tools, errors, tokens) and docs/hooks.md (what the hooks inject).",
    ]


HOOK_NOTE = [
    "The hooks only read: they recall memories at session start and for each prompt, and fail open.",
    "They run as `unknown` (read on every space by default); if you set grants.unknown = [], start each",
    "command with HIVEMEM_TOKEN=<token>.",
]


def claude_code() -> list[str]:
    return [
        "2. Register the MCP server for your user (replace <token> with the token from step 1):",
        "",
        f"claude mcp add --scope user hivemem -e HIVEMEM_TOKEN=<token> -- {command('mcp')}",
        "",
        '3. Add the hooks to ~/.claude/settings.json (merge into its "hooks" if it has some):',
        "",
        hooks("claude-code"),
        "",
        *HOOK_NOTE,
        "",
        "4. Install the skill (~/.claude/skills/hivemem/SKILL.md):",
        "",
        command("skill", "install"),
    ]


def codex() -> list[str]:
    return [
        "2. Register the MCP server (written to ~/.codex/config.toml; replace <token> with the token from step 1):",
        "",
        f"codex mcp add hivemem --env HIVEMEM_TOKEN=<token> -- {command('mcp')}",
        "",
        '3. Add the hooks to ~/.codex/hooks.json (merge into its "hooks" if it has some):',
        "",
        hooks("codex"),
        "",
        *HOOK_NOTE,
        "Codex runs these hooks only after you review and trust them (/hooks in Codex); a changed hook must be",
        "trusted again. Codex releases before hooks were on by default need [features] hooks = true.",
        "",
        "4. Add this paragraph to ~/.codex/AGENTS.md:",
        "",
        AGENTS_MD,
    ]


def opencode() -> list[str]:
    return [
        "2. Add the MCP server to ~/.config/opencode/opencode.json (your user config, not the repository's",
        "   opencode.json; replace <token> with the token from step 1):",
        "",
        opencode_mcp(),
        "",
        '   opencode V2 configs nest servers one level deeper: "mcp": {"servers": {"hivemem": {...}}}.',
        "",
        "3. opencode hooks are JavaScript plugins, so there are none to paste; instead add this paragraph",
        "   to ~/.config/opencode/AGENTS.md:",
        "",
        AGENTS_MD,
    ]


STEPS = {"claude-code": claude_code, "codex": codex, "opencode": opencode}


def setup(harness: str) -> str:
    """The whole text `hivemem setup HARNESS` prints."""
    return "\n".join([*_header(harness), *STEPS[harness](), *_footer()])
