"""`hivemem events [--follow] [--types ...] [--spaces ...]`: print the audit log, or stream it."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.main import Parser, call, verb_parser
from hivemem.cli.params import convert
from hivemem.errors import HivememError
from hivemem.manifest import BY_NAME, Verb


def run(args: list[str]) -> int:
    """List the newest events (printed oldest first, like a log), or follow new ones."""
    follow = "--follow" in args
    rest = [a for a in args if a != "--follow"]
    verb = BY_NAME["events.follow" if follow else "events.list"]
    parser: Parser = verb_parser(verb, "hivemem events")
    parser.add_argument("--follow", action="store_true", help="stream new events until interrupted")
    json_mode = "--json" in args
    try:
        ns = vars(parser.parse_args(rest))
        json_mode = ns.pop("json")
        params = {p.name: convert(p, ns[p.name]) for p in verb.params if ns.get(p.name) is not None}
        if follow:
            return _follow(verb, params, json_mode)
        events = call("events.list", params)["events"]
    except HivememError as exc:
        return output.error(exc, json_mode)
    for event in reversed(events):
        output.event(event, json_mode)
    return 0


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
