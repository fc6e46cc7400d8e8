"""`hivemem setup HARNESS` and `hivemem skill [install]`: what hivemem hands to agents."""

from __future__ import annotations

from collections.abc import Callable

from hivemem.cli import output
from hivemem.cli.parser import Parser
from hivemem.errors import Failed, HivememError

HARNESSES = ("claude-code", "codex", "opencode")


def setup(args: list[str]) -> int:
    parser = Parser(prog="hivemem setup", description="Print the snippets that connect a harness to hivemem.")
    parser.add_argument("harness", choices=HARNESSES)
    try:
        ns = parser.parse_args(args)
    except HivememError as exc:
        return output.error(exc, "--json" in args)
    from hivemem.cli.harnesses import setup as text

    output.line(text(ns.harness))
    return 0


def skill(args: list[str]) -> int:
    parser = Parser(prog="hivemem skill", description="Print SKILL.md for agents, or install it for Claude Code.")
    parser.add_argument("action", nargs="?", choices=("install",), help="write ~/.claude/skills/hivemem/SKILL.md")
    parser.add_argument("--json", action="store_true", help="with install: print {path} as JSON")
    try:
        ns = parser.parse_args(args)
    except HivememError as exc:
        return output.error(exc, "--json" in args)
    from hivemem.cli import skill as skill_md

    if ns.action is None:
        output.line(skill_md.render())
        return 0
    try:
        path = skill_md.install(skill_md.claude_path())
    except OSError as exc:
        return output.error(Failed("skill_install", f"cannot write the skill: {exc}", path=exc.filename), ns.json)
    return output.result("skill.install", {"path": path}, ns.json)


HANDLERS: dict[str, Callable[[list[str]], int]] = {"setup": setup, "skill": skill}
