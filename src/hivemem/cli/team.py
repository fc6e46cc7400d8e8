"""`hivemem team join --token T`: keep this person's client token of the team store (docs/team.md)."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.parser import Parser
from hivemem.errors import HivememError, InvalidParams

CLIENT_TOKEN = r"^hm1\.g[1-9][0-9]{0,17}\.[A-Za-z0-9_-]{43}$"


def join(args: list[str]) -> int:
    """Save the token in the credential store (never in config.toml); the daemon uses it on the team store from its
    next call there. An owner key is refused: the personal owner key grants nothing on the team store."""
    import re

    from hivemem import credentials

    json_mode = "--json" in args
    try:
        parser = Parser(prog="hivemem team join", description=join.__doc__ or "")
        parser.add_argument("--token", required=True, help="the client token an administrator of the team store made")
        parser.add_argument("--json", action="store_true")
        ns = parser.parse_args(args)
        if not re.match(CLIENT_TOKEN, ns.token):
            raise InvalidParams("token", "a team token is a client token hm1.g<N>.<secret> (not an owner key)",
                                param="token", fix="ask the team store's administrator for a client token")  # fmt: skip
        where = credentials.save_team(ns.token)
    except HivememError as exc:
        return output.error(exc, json_mode)
    return output.result("team.join", {"saved": where}, json_mode)
