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
from hivemem.errors import HivememError, InvalidParams, Unsupported
from hivemem.manifest import VERBS, Verb

TOP = {
    "serve": "Run the daemon in the foreground.",
    "stop": "Stop the running daemon gracefully (signals it as your user; no owner key needed).",
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
        from hivemem.cli import suggest

        near = suggest.command(argv, [*TOP, *(v.cli_name for v in VERBS if " " not in v.cli_name), *groups.grouped()])
        hint = f"did you mean 'hivemem {near}'?" if near else "see hivemem --help"
        typed = " ".join(argv[:2]) if near is None or " " in near else command
        error = InvalidParams("usage", f"unknown command 'hivemem {typed}'; {hint}",
                              fix=f"hivemem {near} --help" if near else "hivemem --help")  # fmt: skip
        return output.error(error, "--json" in argv)
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
    """`hivemem stop`: with no daemon running there is nothing to stop, and that is fine. Otherwise the daemon
    behind the verified socket (its peer runs as this user) gets SIGTERM, which it drains on as for the verb:
    anyone of this uid could signal it anyway, so no owner key is needed (docs/security.md). Where the kernel
    does not name the peer's pid, the owner-only verb daemon.stop asks it instead."""
    import os
    import signal

    from hivemem import peer
    from hivemem.client import DaemonClient, try_connect

    json_mode = "--json" in args
    if "--help" in args or "-h" in args:
        return run_verb(verb, args)
    try:
        probe = try_connect(DaemonClient(start=False).paths.socket)
    except HivememError as exc:  # an unsafe socket directory or a foreign listener (docs/schema.md)
        return output.error(exc, json_mode)
    if probe is None:
        return output.result(verb.name, {"stopping": False}, json_mode)
    try:
        pid = peer.pid(probe)  # try_connect checked that the peer runs as this user
    finally:
        probe.close()
    if pid is None:
        return run_verb(verb, args)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:  # it stopped meanwhile
        return output.result(verb.name, {"stopping": False}, json_mode)
    _wait_gone(pid, STOP_WAIT_SECONDS)
    return output.result(verb.name, {"stopping": True}, json_mode)


STOP_WAIT_SECONDS = 5.0  # the daemon drains for at most 2 s, then checkpoints the WAL


def _wait_gone(pid: int, seconds: float) -> None:
    """Wait until the process has exited (a zombie nobody has reaped yet counts as gone), at most `seconds`."""
    import os
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    return
        except FileNotFoundError:
            return
        except OSError:  # no /proc (macOS): ask the kernel
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.02)


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


# `hivemem --help` lists every command once, under what people do with it (docs/cli.md).
HELP_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Remember and find", ("memory add", "memory capture", "memory search", "memory recall", "memory get",
                           "memory list", "memory history", "memory update", "memory relate", "memory unrelate",
                           "memory move", "space list", "import")),
    ("Review", ("ui", "memory review", "memory confirm", "memory challenge", "memory archive", "hygiene",
                "memory audit", "memory delete", "memory restore", "memory forget", "memory purge")),
    ("Sessions and clients", ("session start", "session end", "session get", "session list", "session chain",
                              "session purge", "client add", "client list", "client remove", "whoami", "setup",
                              "skill", "hook", "mcp")),
    ("The store", ("store init", "store status", "store check", "store repair-fts", "store backup",
                   "store restore", "store export", "store import", "embeddings reindex", "events", "events list",
                   "events follow", "config", "config reload", "team join", "doctor")),
    ("The daemon", ("serve", "stop", "ping")),
)  # fmt: skip


def _help(args: list[str]) -> int:
    from hivemem.cli.groups import EXTRA
    from hivemem.cli.wording import summary_line

    # A group's commands that are not verbs (`store restore`) are listed too; `config`'s are under `config`.
    summaries = {v.cli_name: summary_line(v.summary) for v in VERBS}
    summaries.update({f"{group} {name}": summary for group, names in EXTRA.items() if group not in TOP
                      for name, summary in names.items()})  # fmt: skip
    summaries.update(TOP)
    listed = [(heading, [(name, summaries.pop(name)) for name in names]) for heading, names in HELP_GROUPS]
    if summaries:  # a command added without a place in HELP_GROUPS is still listed
        listed.append(("Other", list(summaries.items())))
    output.help_text(__version__, listed)
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
    parser.add_argument("--client", help="connect with the token saved for this client (hivemem client add --save)")
    parser.add_argument(
        "--tools", choices=("default", "all"), help="the tools to offer: the default 10, or all (default: mcp.tools)"
    )
    from hivemem.config import load

    try:
        ns = parser.parse_args(args)
        token = None if ns.client is None else _saved_token(ns.client)
        which = ns.tools or load()["mcp.tools"]
    except HivememError as exc:
        return output.error(exc, False)
    from hivemem.mcp.server import run

    return run(token, which)


def _saved_token(name: str) -> HivememError | str:
    """The token saved for client `name`, or the error each tool call answers with when there is none (the
    server still starts, so the harness shows it connected and the agent can tell the person what to run)."""
    from hivemem import credentials

    try:
        return credentials.read(name) or credentials.no_token(name)
    except HivememError as exc:
        if exc.code.startswith("invalid_params"):
            raise
        return exc


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


SAVE_HELP = (
    "  --save                keep the new token in hivemem's credential store (credentials.json beside "
    "the config, 0600)\n                        instead of printing it; the plugins read it (docs/plugins.md)"
)


def requires(wanted: str, rest: list[str]) -> int | None:
    """`hivemem --requires VERSION COMMAND…`: a plugin's guard against an older hivemem than it was made for.
    None when this one will do; else `unsupported.version` (exit 10), or for a hook, which must never stand in
    the harness's way, a message the harness shows and exit 0 (docs/plugins.md)."""
    from hivemem.cli.plugin import new_enough

    fix = "upgrade hivemem (pip install --upgrade hivemem, or pipx upgrade hivemem), then start a new session"
    try:
        if new_enough(wanted):
            return None
        problem: HivememError = Unsupported("version", f"this plugin needs hivemem {wanted} or newer; this is "
                                            f"{__version__}", needed=wanted, found=__version__, fix=fix)  # fmt: skip
    except HivememError as exc:  # not a version: a usage error (never one that blocks a harness's prompt)
        problem = exc
    if rest[:1] == ["hook"]:
        from hivemem.hooks.main import system_message

        hint = problem.data.get("fix")
        output.payload(system_message(f"hivemem: {problem.message}." + (f" Fix: {hint}." if hint else "")))
        return 0
    return output.error(problem, "--json" in rest)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0].partition("=")[0] == "--requires":
        if "=" in args[0]:
            wanted, args = args[0].partition("=")[2], args[1:]
        else:
            wanted, args = (args[1] if len(args) > 1 else ""), args[2:]
        refused = requires(wanted, args)
        if refused is not None:
            return refused
    verb, rest = find_verb(args)
    if verb is not None:
        if "-h" in rest or "--help" in rest:
            output.line(verb_parser(verb, f"hivemem {verb.cli_name}").format_help())
            if verb.credential == "issues":  # a flag of the CLI's, not a param of the verb (docs/plugins.md)
                output.line(SAVE_HELP)
            return 0
        if verb.stream:  # a stream, not one result: cli/events.py prints it as it comes
            from hivemem.cli import events

            return events.follow(rest)
        if verb.credential == "issues" and "--save" in rest:
            return run_verb(verb, [a for a in rest if a != "--save"], save=True)
        return stop_daemon(verb, rest) if verb.effect == "stop" else run_verb(verb, rest)
    return top_level(args)
