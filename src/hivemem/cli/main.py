"""Parse, connect, one request, print. Builds the parser only for the command being run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from hivemem import __version__
from hivemem.cli import output
from hivemem.cli.params import convert, flag
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import VERBS, Verb

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any, NoReturn

TOP = {
    "serve": "Run the daemon in the foreground.",
    "stop": "Stop the running daemon gracefully (owner).",
    "ping": "Exit 0 if the daemon is up; never starts it.",
    "doctor": "Check the store, its files and the daemon; never starts it.",
    "whoami": "Who this token is: principal, label and grants.",
    "hook": "hook session-start|prompt-submit: recall for a harness hook (read-only, fails open).",
    "mcp": "Run the stdio MCP server for agents (tools generated from the manifest).",
    "setup": "setup claude-code|codex|opencode: print the snippets to paste; never edits settings.",
    "skill": "Print SKILL.md for agents; `skill install` writes it for Claude Code.",
    "events": "Print the audit log; --follow streams new events.",
    "config": "config get [--key K] | config set --key K --value V (owner).",
}


class Parser(argparse.ArgumentParser):
    """argparse that raises a usage error instead of exiting, so --json can report it."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            flags = [a for a in message.split(":", 1)[1].split() if a.startswith("--")]
            if flags:  # SPEC 10: an unknown param is invalid_params.unknown, whatever the surface
                name = flags[0][2:].split("=", 1)[0].replace("-", "_")
                raise InvalidParams("unknown", f"{self.prog} has no --{flags[0][2:].split('=', 1)[0]}", param=name)
        raise InvalidParams("usage", message, usage=self.format_usage().strip())


def command_name(verb: Verb) -> tuple[str, str]:
    group, _, name = verb.name.rpartition(".")
    return group, name.replace("_", "-")


def find_verb(argv: list[str]) -> tuple[Verb | None, list[str]]:
    """The verb `argv` names (`memory add`, `whoami`, `stop`) and the remaining args."""
    if argv and argv[0] in ("whoami", "stop"):
        return next(v for v in VERBS if v.name == {"whoami": "whoami", "stop": "daemon.stop"}[argv[0]]), argv[1:]
    for verb in VERBS:
        group, name = command_name(verb)
        if group and argv[:2] == [group, name]:
            return verb, argv[2:]
    return None, argv


def verb_parser(verb: Verb, prog: str) -> Parser:
    parser = Parser(prog=prog, description=verb.summary, epilog="\n".join(verb.examples) or None)
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")
    for p in verb.params:
        kw: dict[str, Any] = {"dest": p.name, "help": p.help + (" (required)" if p.required else "")}
        if p.type == "boolean":
            kw.update(nargs="?", const="true", metavar="true|false")
        parser.add_argument(f"--{flag(p.name)}", **kw)
    return parser


def attach_values(verb: Verb, args: list[str]) -> list[str]:
    """`--query -zebra` → `--query=-zebra`: a value may start with a dash (argparse would take it for a flag)."""
    takes_value = {f"--{flag(p.name)}" for p in verb.params if p.type != "boolean"}
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in takes_value and i + 1 < len(args) and args[i + 1].startswith("-") and args[i + 1] != "-":
            out.append(f"{args[i]}={args[i + 1]}")
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def default_read_path() -> list[str]:
    """SPEC 3: clients default recall's spaces to the fixed read path, [@project, user, *team spaces]."""
    from hivemem.config import load
    from hivemem.spaces import read_path

    return read_path(None, load()["recall.team_spaces"])


def run_verb(verb: Verb, args: list[str]) -> int:
    group, name = command_name(verb)
    parser = verb_parser(verb, f"hivemem {group} {name}".replace("  ", " ").strip())
    json_mode = "--json" in args
    try:
        ns = vars(parser.parse_args(attach_values(verb, args)))
        json_mode = ns.pop("json")
        params = {p.name: convert(p, ns[p.name]) for p in verb.params if ns.get(p.name) is not None}
        if verb.name == "memory.recall" and "spaces" not in params:
            params["spaces"] = default_read_path()
        result = call(verb.name, params)
    except HivememError as exc:
        return output.error(exc, json_mode)
    return output.result(verb.name, result, json_mode)


def call(verb: str, params: dict[str, Any]) -> dict[str, Any]:
    from hivemem.client import DaemonClient, wait_stopped

    client = DaemonClient(start=verb != "daemon.stop")
    try:
        result = client.call(verb, **params)
        if verb == "daemon.stop":
            wait_stopped(client)
    finally:
        output.warnings(client.warnings)
        client.close()
    return result


def top_level(argv: list[str]) -> int:
    """serve, stop, ping, doctor, --version, --help."""
    command, rest = (argv[0], argv[1:]) if argv else ("--help", [])
    handler = TOP_HANDLERS.get(command)
    if handler is None:
        return output.error(InvalidParams("usage", f"unknown command {' '.join(argv[:2])!r}; see hivemem --help"),
                            "--json" in argv)  # fmt: skip
    return handler(rest)


def _serve(args: list[str]) -> int:
    parser = Parser(prog="hivemem serve", description=TOP["serve"])
    parser.add_argument("--on-demand", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    try:
        ns = parser.parse_args(args)
    except HivememError as exc:
        return output.error(exc, False)
    from hivemem.client import run_daemon

    try:
        return run_daemon(on_demand=ns.on_demand, ready_fd=ns.ready_fd)
    except HivememError as exc:
        return output.error(exc, False)


def _stop(args: list[str]) -> int:
    from hivemem.client import DaemonClient, try_connect

    json_mode = "--json" in args
    probe = try_connect(DaemonClient(start=False).paths.socket)
    if probe is None:
        return output.result("daemon.stop", {"stopping": False}, json_mode)
    probe.close()
    return run_verb(next(v for v in VERBS if v.name == "daemon.stop"), args)


def _ping(args: list[str]) -> int:
    from hivemem.client import DaemonClient

    json_mode = "--json" in args
    client = DaemonClient(start=False, token="", name="ping")
    try:
        hello = client.connect().hello
    except HivememError as exc:
        return output.error(exc, json_mode)
    finally:
        client.close()
    ok = {"running": True, "version": hello.get("version"), "store_id": hello.get("store_id")}
    return output.result("ping", ok, json_mode)


def _doctor(args: list[str]) -> int:
    from hivemem.doctor import run

    report = run(progress=output.progress)
    output.result("doctor", report, "--json" in args)
    return int(report["status"])


def _help(args: list[str]) -> int:
    output.help_text(__version__, TOP, [(" ".join(command_name(v)).strip(), v.summary) for v in VERBS])
    return 0


def _version(args: list[str]) -> int:
    output.line(f"hivemem {__version__}")
    return 0


def _hook(args: list[str]) -> int:
    from hivemem.client import run_hook

    output.payload(run_hook(args))
    return 0  # a hook never fails its harness: problems go to logs/hooks.log


def _events(args: list[str]) -> int:
    from hivemem.cli import events

    return events.run(args)


def _config(args: list[str]) -> int:
    from hivemem.cli import settings

    return settings.run(args)


def _agents(command: str) -> Callable[[list[str]], int]:
    """`mcp`, `setup` and `skill` live in cli/agents.py, imported only when one of them runs."""

    def run(args: list[str]) -> int:
        from hivemem.cli import agents

        return agents.HANDLERS[command](args)

    return run


TOP_HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "events": _events,
    "config": _config,
    "serve": _serve,
    "stop": _stop,
    "ping": _ping,
    "doctor": _doctor,
    "hook": _hook,
    "mcp": _agents("mcp"),
    "setup": _agents("setup"),
    "skill": _agents("skill"),
    "--help": _help,
    "-h": _help,
    "help": _help,
    "--version": _version,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "stop":
        return _stop(args[1:])
    verb, rest = find_verb(args)
    if verb is not None:
        if "-h" in rest or "--help" in rest:
            group, name = command_name(verb)
            output.line(verb_parser(verb, f"hivemem {group} {name}".strip()).format_help())
            return 0
        return run_verb(verb, rest)
    return top_level(args)
