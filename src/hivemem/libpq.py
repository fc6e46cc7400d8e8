"""How libpq would read a team store's `store.url` (docs/team.md): its hosts, TLS mode and whether it holds a
password, judged offline so `doctor` never connects. libpq itself splits the string, through psycopg's
`conninfo_to_dict` (a `postgresql://` URL or a `key=value` conninfo string, docs/decisions.md D345); psycopg is
the team store's driver, in the `team` extra, imported only when a team store is configured.

libpq's own order is followed: a setting in the string (a URL's `?key=value` parameters override its parts)
wins, then the service file's, then the environment's (`PGHOST`, `PGSSLMODE`, …, the variables libpq names for
each setting), then libpq's compiled default (a Unix socket, and `sslmode=prefer`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hivemem.config import is_loopback
from hivemem.errors import Unsupported

TLS_MODES = ("require", "verify-ca", "verify-full")  # the modes under which libpq never talks in the clear
VERIFIED = "verify-full"  # the one that also checks the server's name against its certificate
LAYERED = ("host", "hostaddr", "port", "sslmode", "gssencmode", "service")  # what doctor's checks read
TEAM_EXTRA = "pip install 'hivemem[team]'"


def missing_driver(cause: ImportError) -> Unsupported:
    """unsupported.store_driver: store.url names a team store and its driver, psycopg, is not installed."""
    return Unsupported("store_driver", f"store.url names a PostgreSQL team store, whose driver is not installed "
                       f"({cause.name or 'psycopg'}): {TEAM_EXTRA}", fix=TEAM_EXTRA)  # fmt: skip


def conninfo(url: str) -> dict[str, str]:
    """The settings `url` gives, split by libpq; ValueError when libpq cannot read it, unsupported.store_driver
    when psycopg is not installed."""
    try:
        from psycopg.conninfo import conninfo_to_dict
        from psycopg.errors import ProgrammingError
    except ImportError as exc:
        raise missing_driver(exc) from exc
    try:
        return {key: str(value) for key, value in conninfo_to_dict(url).items()}
    except ProgrammingError as exc:
        raise ValueError(str(exc).strip()) from None


def without_password(url: str) -> str:
    """`url` as status and logs may show it: unchanged when it holds no password, else libpq's `key=value` form
    of its other settings (psycopg's `make_conninfo`), whether the password was in a URL's user info, in its
    `?password=` or a `password=` pair."""
    from psycopg.conninfo import make_conninfo

    settings = conninfo(url)
    if "password" not in settings:
        return url
    del settings["password"]
    return make_conninfo("", **settings)


def bounded(url: str, timeout_ms: int) -> str:
    """A team store's connection string with its waits bounded by `team.timeout_ms` (docs/team.md, D392): libpq's
    connect timeout (whole seconds, at least 2), TCP's user timeout and keepalives (unacknowledged data ends the
    connection), and on the server a lock wait, a statement and an idle transaction that outlast it are ended.
    Settings the URL already names are kept."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(url)
    extra: dict[str, str] = {}
    defaults = {
        "connect_timeout": str(max(2, -(-timeout_ms // 1000))),
        "tcp_user_timeout": str(timeout_ms),
        "keepalives": "1",
        "keepalives_idle": "5",
        "keepalives_interval": "2",
        "keepalives_count": "2",
    }
    extra = {k: v for k, v in defaults.items() if k not in given}
    server = f"-c lock_timeout={timeout_ms} -c idle_in_transaction_session_timeout={max(timeout_ms, 1000)}"
    extra["options"] = f"{given['options']} {server}" if given.get("options") else server
    return make_conninfo(url, **extra)


def _defaults() -> dict[str, tuple[str, str]]:
    """For each setting doctor reads: the environment variable libpq takes it from, and its compiled default."""
    from psycopg.pq import Conninfo

    options = Conninfo.get_defaults()
    return {o.keyword.decode(): ((o.envvar or b"").decode(), (o.compiled or b"").decode()) for o in options
            if o.keyword.decode() in LAYERED}  # fmt: skip


@dataclass
class Target:
    """Where a connection goes and how: one entry per host libpq would try, and where each setting came from."""

    hosts: list[tuple[str, bool]] = field(default_factory=list)  # (shown name, leaves this machine)
    sslmode: str = "prefer"
    sslmode_from: str = "the default"
    gssencmode: str = "prefer"
    password: str = ""  # where a password was found ("" when none); never the password itself
    problem: str = ""  # why the string cannot be read as libpq reads it
    driver: bool = True  # False: psycopg is not installed, so nothing was read (`problem` says what to install)

    @property
    def remote(self) -> list[str]:
        return [name for name, remote in self.hosts if remote]

    @property
    def encrypted(self) -> bool:
        return self.sslmode in TLS_MODES or self.gssencmode == "require"


def target(url: str, env: dict[str, str]) -> Target:
    """The connection `url` describes, with libpq's environment `env` (PG* variables) filling in the gaps;
    unsupported.store_driver when psycopg is not installed."""
    found = Target()
    try:
        given = conninfo(url)
    except ValueError as exc:
        found.problem = str(exc)
        return found
    found.password = "store.url" if given.pop("password", "") else ""
    service = given.get("service") or env.get("PGSERVICE", "")
    from_service = _service(service, env) if service else {}
    if from_service.get("password") and not found.password:
        found.password = f"service {service}"
    settings = _layered({"store.url": given, f"service {service}": from_service}, env)
    found.sslmode, found.sslmode_from = settings["sslmode"]
    found.gssencmode = settings["gssencmode"][0]
    found.hosts = _hosts(settings["host"][0], settings["hostaddr"][0], settings["port"][0])
    return found


def _layered(sources: dict[str, dict[str, str]], env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each setting doctor reads as (value, where it came from): the first source that has it, else its
    environment variable, else libpq's compiled default."""
    settings = {}
    for key, (var, compiled) in _defaults().items():
        here = next(((values[key], source) for source, values in sources.items() if key in values), None)
        settings[key] = here or ((env[var], var) if env.get(var) else (compiled, "the default"))
    return settings


def _hosts(hosts: str, hostaddrs: str, ports: str) -> list[tuple[str, bool]]:
    """Each host libpq would try: a `hostaddr` is where it connects (the name is then only for TLS), a path or
    an empty host is a Unix socket on this machine, any other name leaves it unless it is a loopback one."""
    names, addrs, port_list = hosts.split(","), hostaddrs.split(",") if hostaddrs else [], ports.split(",")
    count = max(len(names), len(addrs))
    found = []
    for i in range(count):
        name = names[i] if i < len(names) else ""
        addr = addrs[i] if i < len(addrs) else ""
        port = port_list[i] if i < len(port_list) else (port_list[0] if len(port_list) == 1 else "")
        where = addr or name
        if not where or where.startswith(("/", "@")):
            found.append((f"the Unix socket {where}" if where else "the default Unix socket", False))
            continue
        shown = (f"[{where}]" if ":" in where else where) + (f":{port}" if port else "")
        found.append((shown, not is_loopback(where)))
    return found


def _service(name: str, env: dict[str, str]) -> dict[str, str]:
    """The settings of service `name`: the user's service file first; the system one only when it lacks it."""
    user = env.get("PGSERVICEFILE") or os.path.expanduser("~/.pg_service.conf")
    system = os.path.join(env.get("PGSYSCONFDIR", "/etc/postgresql-common"), "pg_service.conf")
    for path in (user, system):
        settings = _service_section(path, name)
        if settings is not None:
            return settings
    return {}


def _service_section(path: str, name: str) -> dict[str, str] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    section: str | None = None
    settings: dict[str, str] | None = None
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            if settings is not None:
                break
            section = line[1:-1]
            settings = {} if section == name else None
        elif settings is not None:
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


def password_file(env: dict[str, str]) -> str:
    """libpq's password file: `PGPASSFILE`, else `~/.pgpass`."""
    return env.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
