"""Who is on the other end of a Unix socket: the peer's uid, checked before a byte is sent (docs/schema.md)."""

from __future__ import annotations

import os
import socket
import struct

from hivemem.errors import Denied

# Linux: struct ucred {pid_t pid; uid_t uid; gid_t gid}. macOS and the BSDs: struct xucred
# {u_int cr_version; uid_t cr_uid; ...} under SOL_LOCAL (0) / LOCAL_PEERCRED (1), which is what their
# getpeereid(3) reads; Python exposes neither getpeereid nor those constants everywhere.
UCRED = struct.Struct("=iII")
XUCRED_HEAD = struct.Struct("=II")
SOL_LOCAL = 0
LOCAL_PEERCRED = getattr(socket, "LOCAL_PEERCRED", 1)


def uid(sock: socket.socket) -> int | None:
    """The uid the peer had when it connected or listened; None where the platform cannot tell."""
    if hasattr(socket, "SO_PEERCRED"):
        return int(UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size))[1])
    try:
        raw = sock.getsockopt(SOL_LOCAL, LOCAL_PEERCRED, 256)
    except OSError:
        return None
    return int(XUCRED_HEAD.unpack_from(raw)[1]) if len(raw) >= XUCRED_HEAD.size else None


LOCAL_PEERPID = getattr(socket, "LOCAL_PEERPID", 2)


def pid(sock: socket.socket) -> int | None:
    """The pid of the process at the other end when it connected or listened; None where the platform cannot
    tell (`SO_PEERCRED` on Linux, `LOCAL_PEERPID` on macOS)."""
    if hasattr(socket, "SO_PEERCRED"):
        found = int(UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size))[0])
        return found if found > 0 else None
    try:
        return int(sock.getsockopt(SOL_LOCAL, LOCAL_PEERPID)) or None
    except OSError:
        return None


def is_own(sock: socket.socket) -> bool:
    """Whether the peer runs as this process's uid (an unverifiable peer is not)."""
    return uid(sock) == os.getuid()


def check(sock: socket.socket, path: str) -> None:
    """Refuse (denied.peer) a peer that is not this user, before anything is sent to it."""
    found = uid(sock)
    if found == os.getuid():
        return
    who = "an unverifiable process" if found is None else f"uid {found}"
    raise Denied("peer", f"the process listening on {path} runs as {who}, not as you (uid {os.getuid()}); "
                 "nothing was sent to it", path=path, peer_uid=found,
                 fix=f"find out who made {path}; a hivemem daemon always runs as its user")  # fmt: skip
