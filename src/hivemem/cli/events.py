"""`hivemem events [--follow] [--types ...] [--spaces ...]`: print the audit log, or stream it."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.params import collect
from hivemem.cli.parser import Parser, verb_parser
from hivemem.cli.verbs import call
from hivemem.errors import HivememError
from hivemem.manifest import BY_NAME, Verb


def run(args: list[str]) -> int:
    """List the newest events (printed oldest first, like a log), or follow new ones."""
    follow = "--follow" in args
    verb = BY_NAME["events.follow" if follow else "events.list"]
    parser: Parser = verb_parser(verb, "hivemem events")
    parser.add_argument("--follow", action="store_true", help="stream new events until interrupted")
    json_mode = "--json" in args
    try:
        ns = vars(parser.parse_args(args))
        json_mode = ns.pop("json")
        params = collect(verb, ns)
        if follow:
            return _follow(verb, params, json_mode)
        events = call("events.list", params)["events"]
    except HivememError as exc:
        return output.error(exc, json_mode)
    if not json_mode:  # a finished list is a table, oldest first like a log; --follow streams lines
        return output.result("events.list", {"events": events[::-1]}, json_mode)
    for event in reversed(events):
        output.event(event, json_mode)
    return 0


def follow(args: list[str]) -> int:
    """`hivemem events follow`, the command generated for events.follow: the same stream as `events --follow`."""
    return run(["--follow", *args])


def _follow(verb: Verb, params: dict[str, object], json_mode: bool) -> int:
    from hivemem.client import DaemonClient

    client = DaemonClient()
    try:
        for event in client.stream(verb.name, params, verb.stream):
            output.event(event, json_mode)
    except KeyboardInterrupt:
        return 0
    finally:
        client.close()
    return 0
