"""How libpq would read a team store's `store.url` (SPEC 16): its hosts, TLS mode and whether it holds a
password, parsed with the standard library and never by connecting, so `doctor` can judge it offline.

libpq's own order is followed: a setting in the URL (or its `?key=value` parameters, which override the
URL's parts) wins, then the service file's, then the environment's (`PGHOST`, `PGSSLMODE`, …), then the
compiled default (a Unix socket, and `sslmode=prefer`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import unquote

from hivemem.config import is_loopback

TLS_MODES = ("require", "verify-ca", "verify-full")  # the modes under which libpq never talks in the clear
VERIFIED = "verify-full"  # the one that also checks the server's name against its certificate
ENV = {"host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "sslmode": "PGSSLMODE",
       "gssencmode": "PGGSSENCMODE", "service": "PGSERVICE"}  # fmt: skip


@dataclass
class Target:
    """Where a connection goes and how: one entry per host libpq would try, and where each setting came from."""

    hosts: list[tuple[str, bool]] = field(default_factory=list)  # (shown name, leaves this machine)
    sslmode: str = "prefer"
    sslmode_from: str = "the default"
    gssencmode: str = "prefer"
    password: str = ""  # where a password was found ("" when none); never the password itself
    problem: str = ""  # why the URL cannot be read as libpq reads it

    @property
    def remote(self) -> list[str]:
        return [name for name, remote in self.hosts if remote]

    @property
    def encrypted(self) -> bool:
        return self.sslmode in TLS_MODES or self.gssencmode == "require"


def target(url: str, env: dict[str, str]) -> Target:
    """The connection `url` describes, with libpq's environment `env` (PG* variables) filling in the gaps."""
    found = Target()
    try:
        settings, password = _parse_url(url)
    except ValueError as exc:
        found.problem = str(exc)
        return found
    if password:
        found.password = "store.url"
    service = settings.get("service") or env.get("PGSERVICE", "")
    from_service = _service(service, env) if service else {}
    if from_service.get("password") and not found.password:
        found.password = f"service {service}"
    sources = {"store.url": settings, f"service {service}": from_service}
    for key, var in ENV.items():
        for source, values in sources.items():
            if key in values:
                settings.setdefault(key, values[key])
                settings.setdefault(f"{key}_from", source)
                break
        else:
            if env.get(var):
                settings.setdefault(key, env[var])
                settings.setdefault(f"{key}_from", var)
    found.sslmode = settings.get("sslmode", "prefer")
    found.sslmode_from = settings.get("sslmode_from", "the default")
    found.gssencmode = settings.get("gssencmode", "prefer")
    found.hosts = _hosts(settings.get("host", ""), settings.get("hostaddr", ""), settings.get("port", ""))
    return found


def _parse_url(url: str) -> tuple[dict[str, str], bool]:
    """`postgresql://[user[:password]@][host][:port][,…][/dbname][?key=value&…]` as libpq splits it."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError("not a postgresql:// URL")
    settings: dict[str, str] = {}
    rest, _, query = rest.partition("?")
    at, slash = rest.find("@"), rest.find("/")
    given = False
    if at >= 0 and (slash < 0 or at < slash):  # libpq: user info is what precedes an '@' before any '/'
        _, colon, secret = rest[:at].partition(":")
        given, rest = bool(colon and secret), rest[at + 1 :]
    netloc = rest.partition("/")[0]
    if netloc:
        hosts, ports = _netloc(netloc)
        settings.update(host=",".join(hosts), port=",".join(ports))
    for pair in filter(None, query.split("&")):
        key, eq, value = pair.partition("=")
        if not eq:
            raise ValueError(f"parameter {unquote(key)!r} has no value")
        key, value = unquote(key), unquote(value)
        if key == "password":
            given = bool(value) or given
        elif (key, value) in (("requiressl", "1"), ("ssl", "true")):
            settings["sslmode"] = "require"  # libpq's old and JDBC spellings of sslmode=require
        else:
            settings[key] = value
    return settings, given


def _netloc(netloc: str) -> tuple[list[str], list[str]]:
    """Hosts and ports of `host[:port][,host[:port]…]`, where an IPv6 host is bracketed."""
    hosts, ports = [], []
    for part in netloc.split(","):
        if part.startswith("["):
            host, bracket, tail = part[1:].partition("]")
            if not bracket or (tail and not tail.startswith(":")):
                raise ValueError("an IPv6 host is not closed by ']'")
            port = tail[1:]
        else:
            host, _, port = part.partition(":")
        hosts.append(unquote(host))
        ports.append(unquote(port))
    return hosts, ports


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
