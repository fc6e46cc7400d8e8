"""`hivemem store init`: create the store and its owner key before any daemon starts (docs/team.md)."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.parser import Parser
from hivemem.errors import HivememError

SUMMARY = ("Create the store and the owner key: with store.url set, the team store's schema in that empty "
           "PostgreSQL database. The key is printed once and written to owner.key (0600); copy that file to the "
           "team's other machines that need the owner.")  # fmt: skip


def run(args: list[str]) -> int:
    parser = Parser(prog="hivemem store init", description=SUMMARY)
    parser.add_argument("--runtime-role", metavar="ROLE",
                        help="Team store only: the PostgreSQL role every daemon connects as. Everything is revoked "
                             "from it, then exactly what the verbs need is granted, and the role is recorded; run "
                             "as the schema's owner (docs/team.md).")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    json_mode = "--json" in args
    try:
        parsed = parser.parse_args(args)
        return output.result("store.init", _init(parsed.runtime_role), json_mode)
    except HivememError as exc:
        return output.error(exc, json_mode)


def _init(runtime_role: str | None) -> dict[str, object]:
    from hivemem import config, ops, paths
    from hivemem.errors import InvalidParams

    cfg = config.load()
    if runtime_role is not None and not cfg["store.url"]:
        raise InvalidParams("runtime_role", "--runtime-role is for a team store on PostgreSQL; store.url is empty",
                            fix="set store.url to the team store, or leave --runtime-role out")  # fmt: skip
    where = paths.resolve(cfg["store.path"], cfg.path, bool(cfg["store.url"]))
    paths.ensure_dir(where.data_dir)
    return ops.init_store(where.store, where.owner_key, url=str(cfg["store.url"]), runtime_role=runtime_role)
