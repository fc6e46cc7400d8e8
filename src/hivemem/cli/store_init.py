"""`hivemem store init`: create the store and its owner key before any daemon starts (SPEC 16)."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.parser import Parser
from hivemem.errors import HivememError

SUMMARY = ("Create the store and the owner key: with store.url set, the team store's schema in that empty "
           "PostgreSQL database. The key is printed once and written to owner.key (0600); copy that file to the "
           "team's other machines that need the owner.")  # fmt: skip


def run(args: list[str]) -> int:
    parser = Parser(prog="hivemem store init", description=SUMMARY)
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    json_mode = "--json" in args
    try:
        parser.parse_args(args)
        return output.result("store.init", _init(), json_mode)
    except HivememError as exc:
        return output.error(exc, json_mode)


def _init() -> dict[str, object]:
    from hivemem import config, ops, paths

    cfg = config.load()
    where = paths.resolve(cfg["store.path"], cfg.path, bool(cfg["store.url"]))
    paths.ensure_dir(where.data_dir)
    return ops.init_store(where.store, where.owner_key, url=str(cfg["store.url"]))
