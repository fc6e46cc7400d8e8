"""`hivemem config get [--key K]` and `hivemem config set --key K --value V`: the file, never the daemon's start."""

from __future__ import annotations

import os

from hivemem.cli import output
from hivemem.cli.parser import Parser
from hivemem.errors import Denied, HivememError, InvalidParams


def run(args: list[str]) -> int:
    """`config get` and `config set`; anything else is the group's help or a usage error listing its commands."""
    json_mode = "--json" in args
    try:
        if args[:1] == ["get"]:
            return _get(args[1:], json_mode)
        if args[:1] == ["set"]:
            return _set(args[1:], json_mode)
    except HivememError as exc:
        return output.error(exc, json_mode)
    from hivemem.cli import groups

    return groups.run("config", args)


def _get(args: list[str], json_mode: bool) -> int:
    from hivemem import config

    parser = Parser(prog="hivemem config get", description="Show settings in force (file over defaults).")
    parser.add_argument("--key", help="one setting, e.g. daemon.idle_timeout_ms")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args(args)
    values = config.effective(config.load())
    if ns.key is None:
        return output.result("config.get", values, json_mode)
    if ns.key not in values:
        raise InvalidParams("config", f"unknown config key {ns.key}", key=ns.key)
    return output.result("config.get", {"key": ns.key, "value": values[ns.key]}, json_mode)


def _set(args: list[str], json_mode: bool) -> int:
    from hivemem import config, paths

    parser = Parser(prog="hivemem config set", description="Validate and write one setting (owner).")
    parser.add_argument("--key", required=True)
    parser.add_argument("--value", required=True, help='TOML syntax (1000, true, ["a"]) or a plain string')
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args(args)
    current = config.load()
    where = paths.resolve(current["store.path"], current.path, bool(current["store.url"]))
    _require_owner(where.owner_key, where.store)
    if ns.key in ("store.url", "team.url"):
        _refuse_password(str(config.parse_value(ns.key, ns.value)), ns.key)
    value = config.set_value(current.path, ns.key, ns.value)
    _reload_running_daemon()
    return output.result("config.set", {"key": ns.key, "value": value}, json_mode)


def _refuse_password(url: str, key: str = "store.url") -> None:
    """A team store's password belongs in libpq's password file, never in hivemem's config (docs/team.md)."""
    from hivemem import config, libpq

    if url and libpq.target(url, {}).password == "store.url":
        pgpass = libpq.password_file(config.libpq_environment())
        raise InvalidParams(
            "config",
            f"config key {key}: holds a password; hivemem's config never stores credentials",
            key=key,
            fix=f"set {key} without the password and put it in {pgpass} (0600): host:port:database:user:password",
        )


def _require_owner(key_path: str, store_path: str) -> None:
    from hivemem import paths

    fix = "HIVEMEM_TOKEN=@owner hivemem config set ...  # as the user who owns the store"
    if paths.token() != "@owner":
        raise Denied("admin", "config set needs HIVEMEM_TOKEN=@owner", right="admin", resource="config", fix=fix)
    if not os.path.lexists(key_path) and not os.path.lexists(store_path):
        return  # a fresh home: no store and no owner yet, so whoever configures it first is the owner-to-be
    try:
        with open(key_path, encoding="ascii") as f:
            f.read(1)
    except OSError:
        why = "config set needs a readable owner key; the daemon creates it at first start"
        first = "hivemem space list  # any call that reaches the daemon starts it once, creating owner.key"
        raise Denied("admin", why, right="admin", resource="config", fix=first) from None


def _reload_running_daemon() -> None:
    from hivemem.client import DaemonClient

    client = DaemonClient(start=False, token="@owner")
    try:
        client.call("config.reload")
    except HivememError as exc:
        if exc.code != "unavailable.not_running":
            raise
    finally:
        client.close()
