"""`hivemem store restore --path FILE`: swap in a backup while no daemon serves the store (owner)."""

from __future__ import annotations

import os

from hivemem.cli import output
from hivemem.cli.parser import Parser
from hivemem.errors import Denied, HivememError

SUMMARY = ("Replace the store with a validated backup while no daemon runs (owner); the current store is kept "
           "in backups/, and the restored one is checked.")  # fmt: skip


def run(args: list[str]) -> int:
    parser = Parser(prog="hivemem store restore", description=SUMMARY)
    parser.add_argument("--path", required=True, help="The backup file (a hivemem store).")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    json_mode = "--json" in args
    try:
        ns = parser.parse_args(args)
        return output.result("store.restore", _restore(os.path.abspath(os.path.expanduser(ns.path))), json_mode)
    except HivememError as exc:
        return output.error(exc, json_mode)


def _restore(source: str) -> dict[str, object]:
    from hivemem import config, ops, paths

    if paths.token() != "@owner":
        fix = "HIVEMEM_TOKEN=@owner hivemem store restore --path FILE"
        raise Denied("admin", "restore replaces the whole store: the owner only", right="admin",
                     resource="store.restore", fix=fix)  # fmt: skip
    cfg = config.load()
    where = paths.resolve(cfg["store.path"], cfg.path, bool(cfg["store.url"]))
    return ops.restore_store(where.store, source, int(cfg["backups.keep"]), url=str(cfg["store.url"]))
