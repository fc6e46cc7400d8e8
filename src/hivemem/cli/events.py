"""`hivemem events [--follow] [--limit N] [--types ...] [--spaces ...]`: print the audit log, or stream it."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.params import collect
from hivemem.cli.parser import Parser, verb_parser
from hivemem.cli.verbs import call
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import BY_NAME, Verb

FOLLOWING = "following new events (Ctrl-C stops)…"


def run(args: list[str]) -> int:
    """List the newest events (printed oldest first, like a log), or follow new ones; `--follow --limit N`
    prints the newest N first, as `tail -n N -f` does (docs/cli.md)."""
    follow = "--follow" in args
    listing = BY_NAME["events.list"]
    parser: Parser = verb_parser(listing, "hivemem events")
    parser.add_argument("--follow", action="store_true", help="stream new events until interrupted; with --limit "
                        "N, print the newest N first; with --after ID, start after event ID")  # fmt: skip
    json_mode = "--json" in args
    try:
        ns = vars(parser.parse_args(args))
        json_mode = ns.pop("json")
        ns.pop("follow")
        params = collect(listing, ns)
        if follow:
            return _tail(params, json_mode)
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
    verb = BY_NAME["events.follow"]
    parser: Parser = verb_parser(verb, "hivemem events follow")
    json_mode = "--json" in args
    try:
        ns = vars(parser.parse_args(args))
        json_mode = ns.pop("json")
        return _follow(verb, collect(verb, ns), json_mode)
    except HivememError as exc:
        return output.error(exc, json_mode)


def _tail(params: dict[str, object], json_mode: bool) -> int:
    """`events --follow`: with --limit, the newest events first, then the stream from just after them."""
    verb = BY_NAME["events.follow"]
    if "limit" not in params:  # --after N starts the stream after event N (docs/decisions.md D26)
        return _follow(verb, params, json_mode)
    if "after" in params:  # events.list's --after pages down, the stream's starts up: the two cannot both hold
        raise InvalidParams("usage", "--follow --limit shows the newest events, then new ones; it takes no --after",
                            param="after")  # fmt: skip
    events = call("events.list", params)["events"]
    for event in reversed(events):
        output.event(event, json_mode)
    start = {k: v for k, v in params.items() if k != "limit"}
    if events:
        start["after"] = events[0]["id"]  # nothing between the list and the stream is lost
    return _follow(verb, start, json_mode)


def _follow(verb: Verb, params: dict[str, object], json_mode: bool) -> int:
    from hivemem.client import DaemonClient

    def started(_: dict[str, object]) -> None:
        if not json_mode:  # people see that it waits; a --json reader's stdout stays one event per line
            output.note(FOLLOWING)
            output.flush()

    client = DaemonClient()
    try:
        for event in client.stream(verb.name, params, verb.stream, started):
            output.event(event, json_mode)
            output.flush()
    except KeyboardInterrupt:
        return 0
    finally:
        client.close()
    return 0
