"""The composition root: routes a command line to its command, and the only module that starts
the daemon (`serve`), the MCP server (`mcp`), the hooks (`hook`) and the review UI (`ui`). Nothing imports it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from hivemem import __version__
from hivemem.cli import output
from hivemem.cli.parser import Parser, find_verb, verb_parser
from hivemem.cli.verbs import run_verb
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import VERBS, Verb

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
    "ui": "Serve the review UI in the browser on 127.0.0.1; prints a one-time login URL.",
    "import": "import --from claude-code|codex|mcp-memory|markdown --space S: bring in memories other tools keep.",
}


def top_level(argv: list[str]) -> int:
    """serve, stop, ping, doctor, --version, --help."""
    command, rest = (argv[0], argv[1:]) if argv else ("--help", [])
    handler = TOP_HANDLERS.get(command)
    if handler is None:
        from hivemem.cli import groups

        if groups.is_group(command):
            return groups.run(command, rest)
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
    from hivemem.daemon.main import serve

    try:
        return serve(on_demand=ns.on_demand, ready_fd=ns.ready_fd)
    except HivememError as exc:
        return output.error(exc, False)


def stop_daemon(verb: Verb, args: list[str]) -> int:
    """A verb whose effect stops the daemon: with no daemon running there is nothing to stop, and that is fine."""
    from hivemem.client import DaemonClient, try_connect

    json_mode = "--json" in args
    try:
        probe = try_connect(DaemonClient(start=False).paths.socket)
    except HivememError as exc:  # an unsafe socket directory or a foreign listener (SPEC 5.2)
        return output.error(exc, json_mode)
    if probe is None:
        return output.result(verb.name, {"stopping": False}, json_mode)
    probe.close()
    return run_verb(verb, args)


def _json_only(command: str, args: list[str]) -> bool:
    """Parse a command whose one flag is --json; --help prints its usage and exits 0 before it does anything."""
    parser = Parser(prog=f"hivemem {command}", description=TOP[command])
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")
    return bool(parser.parse_args(args).json)


def _ping(args: list[str]) -> int:
    from hivemem.client import DaemonClient

    try:
        json_mode = _json_only("ping", args)
    except HivememError as exc:
        return output.error(exc, "--json" in args)
    client = DaemonClient(start=False, token="", name="ping")
    try:
        hello = client.connect().hello
    except HivememError as exc:
        if exc.code == "unavailable.not_running" and client.config["daemon.startup"] != "explicit":
            exc.data["fix"] = "nothing to do: the next command that needs the daemon starts it (hivemem whoami)"
        return output.error(exc, json_mode)
    finally:
        client.close()
    ok = {"running": True, "version": hello.get("version"), "store_id": hello.get("store_id")}
    return output.result("ping", ok, json_mode)


def _doctor(args: list[str]) -> int:
    try:
        json_mode = _json_only("doctor", args)
    except HivememError as exc:
        return output.error(exc, "--json" in args)
    from hivemem.doctor import run

    report = run(progress=output.progress)
    output.result("doctor", report, json_mode)
    return int(report["status"])


def _help(args: list[str]) -> int:
    from hivemem.cli.groups import EXTRA

    # A group's commands that are not verbs (`store restore`) are listed too; `config`'s are under `config`.
    extra = [(f"{group} {name}", summary) for group, names in EXTRA.items() if group not in TOP
             for name, summary in names.items()]  # fmt: skip
    output.help_text(__version__, TOP, [(v.cli_name, v.summary) for v in VERBS] + extra)
    return 0


def _version(args: list[str]) -> int:
    output.line(f"hivemem {__version__}")
    return 0


def _hook(args: list[str]) -> int:
    from hivemem.hooks.main import run

    output.payload(run(args))
    return 0  # a hook never fails its harness: problems go to logs/hooks.log


def _events(args: list[str]) -> int:
    from hivemem.cli import events

    return events.run(args)


def _config(args: list[str]) -> int:
    from hivemem.cli import settings

    return settings.run(args)


def _import(args: list[str]) -> int:
    from hivemem.cli import harvest_command

    return harvest_command.run(args)


def _mcp(args: list[str]) -> int:
    """Serve MCP on stdio; the daemon is reached on the first tool call."""
    parser = Parser(prog="hivemem mcp", description="Run the stdio MCP server (register it with your harness).")
    try:
        parser.parse_args(args)
    except HivememError as exc:
        return output.error(exc, False)
    from hivemem.mcp.server import run

    return run()


def _ui(args: list[str]) -> int:
    """The review UI: serves until Ctrl-C, as the owner, through the daemon like every other client."""
    parser = Parser(prog="hivemem ui", description=TOP["ui"])
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--expose", action="store_true", help="allow a non-loopback --host (warns)")
    parser.add_argument("--login-ttl", type=float, default=600.0, help="seconds the login URL stays valid")
    parser.add_argument(
        "--read-timeout", type=float, default=10.0, help="seconds a connection has to send each request (default 10)"
    )
    try:
        ns = parser.parse_args(args)
    except HivememError as exc:
        return output.error(exc, False)
    from hivemem.web.server import serve

    def ready(url: str, warning: str) -> None:
        if warning:
            output.warnings([warning])
        output.line(f"hivemem ui: open {url}")
        output.line("The link works once and logs this browser in as the owner. Ctrl-C stops the UI.")
        output.flush()

    try:
        return serve(
            ns.host, ns.port, exposed=ns.expose, login_ttl=ns.login_ttl, read_timeout=ns.read_timeout, ready=ready
        )
    except HivememError as exc:
        return output.error(exc, False)
    except KeyboardInterrupt:
        return 0


def _agents(command: str) -> Callable[[list[str]], int]:
    """`setup` and `skill` live in cli/agents.py, imported only when one of them runs."""

    def run(args: list[str]) -> int:
        from hivemem.cli import agents

        return agents.HANDLERS[command](args)

    return run


TOP_HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "events": _events,
    "config": _config,
    "import": _import,
    "serve": _serve,
    "ping": _ping,
    "doctor": _doctor,
    "hook": _hook,
    "mcp": _mcp,
    "ui": _ui,
    "setup": _agents("setup"),
    "skill": _agents("skill"),
    "--help": _help,
    "-h": _help,
    "help": _help,
    "--version": _version,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    verb, rest = find_verb(args)
    if verb is not None:
        if "-h" in rest or "--help" in rest:
            output.line(verb_parser(verb, f"hivemem {verb.cli_name}").format_help())
            return 0
        if verb.stream:  # a stream, not one result: cli/events.py prints it as it comes
            from hivemem.cli import events

            return events.follow(rest)
        return stop_daemon(verb, rest) if verb.effect == "stop" else run_verb(verb, rest)
    return top_level(args)
