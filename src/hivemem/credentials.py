"""hivemem's own credential store: `credentials.json` beside the config (0600), and the `executable` record.

`hivemem client add --name claude-code --save` keeps the new token here, so a harness plugin never holds one in a
file the harness owns or syncs; `hivemem mcp --client NAME` and `hivemem hook … --client NAME` read it
(docs/decisions.md D310). The file is read only if it is a regular file of this user that no one else may read:
a symlink, a FIFO, a device, another user's file or a group/world-readable one is `denied.path`.
"""

from __future__ import annotations

import json
import os
import re
import stat

from hivemem import paths
from hivemem.errors import Denied, Failed, InvalidParams

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")  # a client name (docs/verbs.md, client.add)
MAX_BYTES = 1 << 20  # a credential file is a few hundred bytes; more is not ours


def directory() -> str:
    """Where the config lives (`$XDG_CONFIG_HOME/hivemem`): the credential store sits beside it."""
    return os.path.dirname(paths.resolve().config)


def path() -> str:
    return os.path.join(directory(), "credentials.json")


def executable_path() -> str:
    """The file that records which `hivemem` a plugin runs when none is on the harness's PATH (docs/plugins.md)."""
    return os.path.join(directory(), "executable")


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise InvalidParams("range", f"client name {name[:80]!r}: lowercase letters, digits and '-', at most 64",
                            param="client")  # fmt: skip
    return name


def _refuse(where: str, why: str, fix: str) -> Denied:
    return Denied("path", f"{where} {why}; hivemem will not use it", path=where, fix=fix)


def read_all(where: str | None = None) -> dict[str, str]:
    """Every saved token by client name; {} when there is no file. Refuses an unsafe file with `denied.path`."""
    return _read(where)[0]


def _read(where: str | None = None) -> tuple[dict[str, str], str]:
    """The saved client tokens by name, and the team store's token ('' when none)."""
    where = where or path()
    try:  # O_NONBLOCK: a FIFO planted here must not hang the harness; fstat then refuses it
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return {}, ""
    except OSError as exc:
        if os.path.islink(where):
            raise _refuse(where, "is a symbolic link", f"rm {where} and save the token again") from None
        raise Failed("credentials", f"cannot read {where}: {exc.strerror}", path=where) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(where, "is not a regular file", f"rm {where} and save the token again")
        if st.st_uid != os.getuid():
            raise _refuse(where, "is owned by another user", f"rm {where} and save the token again")
        if st.st_mode & 0o077:
            mode = f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0600 (others could read a token)"
            raise _refuse(where, mode, f"chmod 600 {where}, then replace its tokens (hivemem client remove, add)")
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        document = json.loads(data) if len(data) <= MAX_BYTES else None
    except ValueError:
        document = None
    clients = document.get("clients") if isinstance(document, dict) else None
    team = document.get("team", "") if isinstance(document, dict) else None
    if (
        not isinstance(clients, dict)
        or not all(isinstance(v, str) for v in clients.values())
        or not isinstance(team, str)
    ):
        raise Failed("credentials", f"{where} is not a hivemem credential file", path=where,
                     fix=f"move {where} away and save the tokens again")  # fmt: skip
    return {str(k): v for k, v in clients.items()}, team


def read(name: str) -> str:
    """The saved token of client `name`, or '' when none is saved."""
    return read_all().get(check_name(name), "")


def save(name: str, token: str) -> str:
    """Keep `token` for client `name` (replacing an older one); returns the file's path. Written atomically 0600."""
    check_name(name)
    paths.ensure_dir(directory())
    where = path()
    clients, team = _read(where)
    clients[name] = token
    _write(where, clients, team)
    return where


def forget(name: str) -> bool:
    """Drop the token saved for client `name` (after `client remove`); True if one was saved."""
    where = path()
    clients, team = _read(where)
    if clients.pop(name, None) is None:
        return False
    _write(where, clients, team)
    return True


def read_team(where: str | None = None) -> str:
    """The client token this person uses on the team store (`hivemem team join`), or '' (docs/team.md)."""
    return _read(where)[1]


def save_team(token: str) -> str:
    """Keep the team store's client token (replacing an older one); returns the file's path. 0600, like the rest."""
    paths.ensure_dir(directory())
    where = path()
    clients, _ = _read(where)
    _write(where, clients, token)
    return where


def _write(where: str, clients: dict[str, str], team: str) -> None:
    document: dict[str, object] = {
        "format": "hivemem.credentials",
        "version": 1,
        "clients": dict(sorted(clients.items())),
    }
    if team:
        document["team"] = team
    paths.write_private(where, (json.dumps(document, indent=2) + "\n").encode("utf-8"))


def record_executable(command: list[str]) -> str:
    """Record the absolute path of this `hivemem` for the plugins' command lines; '' when it is not one file."""
    if len(command) != 1 or not os.path.isabs(command[0]):
        return ""
    paths.ensure_dir(directory())
    where = executable_path()
    paths.write_private(where, (command[0] + "\n").encode("utf-8"))
    return where


def no_token(name: str) -> Failed:
    """What a plugin says when no token is saved for it: the one command to run."""
    return Failed("no_token", f"no hivemem token is saved for client {name!r}", client=name,
                  fix=save_command(name))  # fmt: skip


def save_command(name: str) -> str:
    grants = '[{"right":"read","scope":"*"},{"right":"write","scope":"*"}]'
    return f"HIVEMEM_TOKEN=@owner hivemem client add --name {name} --grants '{grants}' --save"
