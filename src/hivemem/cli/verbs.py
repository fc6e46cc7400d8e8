"""The commands generated from the manifest: parse the flags, make one request, print its result."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.params import collect
from hivemem.cli.parser import attach_values, verb_parser
from hivemem.errors import HivememError
from hivemem.manifest import BY_NAME, Verb

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any

    from hivemem.client import Progress


def client_defaults(verb: Verb, params: dict[str, Any]) -> dict[str, Any]:
    """Absent params with a `client_default` filled in (docs/verbs.md: recall's spaces are the fixed read path)."""
    if not any(p.client_default and p.name not in params for p in verb.params):
        return params  # the config is read only when a default needs it
    from hivemem.config import load
    from hivemem.spaces import fill_defaults

    return fill_defaults(verb, params, None, load()["recall.team_spaces"])


def run_verb(verb: Verb, args: list[str], *, save: bool = False) -> int:
    """One verb from its command line; with `save` (`client add --save`), the new token goes to hivemem's
    credential store instead of the screen (docs/decisions.md D310)."""
    parser = verb_parser(verb, f"hivemem {verb.cli_name}")
    json_mode = "--json" in args
    try:
        ns = vars(parser.parse_args(attach_values(verb, args)))
        json_mode = ns.pop("json")
        params = client_defaults(verb, collect(verb, ns))
        if save:  # a credential file hivemem would refuse is refused before the client is made, not after
            from hivemem import credentials

            credentials.read_all()
        with output.Working(f"hivemem {verb.cli_name}", verb.long and not json_mode) as working:
            result = call(verb.name, params, working.progress, quiet=json_mode)
        if save:
            result = saved(result)
    except HivememError as exc:
        return output.error(exc, json_mode)
    if verb.credential == "revokes":  # its saved token, revoked now, goes from the credential store too
        forget_saved(str(params["name"]))
    code = output.result(verb.name, result, json_mode)
    if verb.follows and not json_mode and output.on_terminal():
        follow(verb, int(result.get(verb.follows, 0)))
    if verb.writes and "space" in params:  # a write into one named space (memory.add)
        from hivemem.cli.notes import unrecalled_space

        output.warnings(unrecalled_space(params["space"]))
    return code


def saved(result: dict[str, Any]) -> dict[str, Any]:
    """Keep a new client's token in the credential store and record this hivemem's path for the plugins; the
    result then names the file instead of showing the token."""
    from hivemem import credentials
    from hivemem.cli.harnesses import executable

    try:
        where = credentials.save(str(result["client"]), str(result["token"]))
    except HivememError as exc:  # the client exists now: its token is shown rather than lost
        output.warnings([f"the token was not saved ({exc.code}: {exc.message}); it is shown instead, once"])
        return result
    del result["token"]
    result["saved"] = where
    result["executable"] = credentials.record_executable(executable()) or None
    return result


def forget_saved(name: str) -> None:
    from hivemem import credentials

    try:
        credentials.forget(name)
    except HivememError as exc:  # the client is removed either way; the file is the person's to fix
        output.warnings([f"the saved token of {name} was not dropped from the credential store ({exc.code})"])


def follow(verb: Verb, total: int, every: float = 0.5) -> None:
    """Show the background work a verb started going down to 0 in `store.status` (its `follows` count), on a
    terminal; Ctrl-C or an error stops the watching, never the work."""
    import time

    left = total
    try:
        with output.Working(f"hivemem {verb.cli_name}", True) as working:
            while left > 0 and working.progress is not None:
                working.progress(verb.follows, total - left, total)
                time.sleep(every)  # the daemon's worker, not this process, does the work
                left = min(total, int(call("store.status", {}).get(verb.follows, 0)))
    except (KeyboardInterrupt, HivememError):
        output.warnings([f"stopped watching; the work goes on in the daemon (hivemem store status: {verb.follows})"])
        return
    output.note(f"{verb.follows}: 0 of {total:,} left")


def call(verb: str, params: dict[str, Any], progress: Progress | None = None, *, quiet: bool = False) -> dict[str, Any]:
    """One request; a verb whose effect stops the daemon never starts one, and returns once it has gone. With
    `progress`, the daemon's progress frames are passed to it (D114); unless `quiet` (--json), a daemon that
    migrates the store as it starts shows that on a terminal."""
    from hivemem.client import DaemonClient, wait_stopped

    stops = BY_NAME[verb].effect == "stop"
    client = DaemonClient(start=not stops, starting=None if quiet else output.starting)
    try:
        result = client.connect().request(verb, params, progress)
        if stops:
            wait_stopped(client)
    finally:
        output.warnings(client.warnings)
        client.close()
    return result
