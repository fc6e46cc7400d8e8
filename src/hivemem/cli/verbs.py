"""The commands generated from the manifest: parse the flags, make one request, print its result."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.params import collect
from hivemem.cli.parser import attach_values, command_name, verb_parser
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import Verb

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any


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
        params = collect(verb, ns)
        if verb.name == "memory.recall" and "spaces" not in params:
            params.update(spaces=default_read_path(), fixed_path=True)
        result = call(verb.name, params)
    except HivememError as exc:
        return output.error(exc, json_mode)
    code = output.result(verb.name, result, json_mode)
    if verb.name == "memory.add":
        from hivemem.cli.notes import unrecalled_space

        output.warnings(unrecalled_space(params["space"]))
    return code


def call(verb: str, params: dict[str, Any]) -> dict[str, Any]:
    from hivemem.client import DaemonClient, wait_stopped
    from hivemem.protocol import MAX_FRAME, encode

    if len(encode({"id": 0, "verb": verb, "params": params})) > MAX_FRAME:  # refused here, not as a lost daemon
        raise InvalidParams("frame", f"a request is limited to {MAX_FRAME} bytes", max_bytes=MAX_FRAME)
    client = DaemonClient(start=verb != "daemon.stop")
    try:
        result = client.call(verb, **params)
        if verb == "daemon.stop":
            wait_stopped(client)
    finally:
        output.warnings(client.warnings)
        client.close()
    return result
