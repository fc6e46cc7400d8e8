"""Daemon start-up: umask, directories, locks, readiness pipe, socket; and the log."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass

from hivemem import paths
from hivemem.config import Config
from hivemem.errors import Conflict, HivememError
from hivemem.store.clock import now


@dataclass
class Locks:
    """The socket lock and the store lock, held for the daemon's life."""

    fds: tuple[int, ...]
    socket_lock: str = ""

    def release(self) -> None:
        """Remove the socket lock file while still holding it (docs/protocol.md), then let go of both."""
        if self.socket_lock and self.fds:
            with contextlib.suppress(OSError):
                if _names(self.socket_lock, self.fds[0]):
                    os.unlink(self.socket_lock)
        for fd in self.fds:
            os.close(fd)


def prepare(where: paths.Paths) -> None:
    """Create every directory 0700 (the log's first) and refuse unsafe, symlinked or foreign ones."""
    os.umask(0o077)
    paths.ensure_dir(where.logs)
    paths.ensure_dir(where.data_dir)
    paths.ensure_socket_dir(os.path.dirname(where.socket))
    for path in (where.store, where.owner_key, where.store + "-wal", where.store_lock, where.socket_lock):
        paths.check_not_link(path)


def _open_lock(path: str) -> int | None:
    """The lock file, opened; None on a read-only file system without one, where no writer can exist."""
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o600)
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
    try:
        return os.open(path, os.O_RDONLY | flags)  # flock needs no write access
    except FileNotFoundError:
        return None


def _names(path: str, fd: int) -> bool:
    """Whether `path` still names the file open on `fd`."""
    try:
        st, held = os.lstat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def _flock(path: str) -> int | None:
    """The fd of the lock at `path`, held; None while another process holds it; -1 if there is none to take."""
    while True:
        fd = _open_lock(path)
        if fd is None:
            return -1
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if _names(path, fd):
            break
        os.close(fd)  # its holder removed it at a clean stop: take the file the path names now
    with contextlib.suppress(OSError):  # the pid is for people and tests; a full disk must not stop a start
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def acquire(where: paths.Paths, wait_until: float | None) -> Locks:
    """Take both locks; wait (on demand) while a previous daemon drains, else conflict.store_locked."""
    held: list[int] = []
    for path in (where.socket_lock, where.store_lock):
        while (fd := _flock(path)) is None:
            serving = _socket_alive(where.socket)
            if wait_until is None or serving or time.monotonic() > wait_until:
                Locks(tuple(held), where.socket_lock).release()
                raise Conflict("store_locked", f"another hivemem daemon holds {path}", path=path)
            time.sleep(0.02)
        if fd >= 0:
            held.append(fd)
    return Locks(tuple(held), where.socket_lock)


def _socket_alive(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def bind(path: str) -> socket.socket:
    """Listen on the store's socket, 0600, replacing a stale file (we hold the lock)."""
    if os.path.lexists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def report(fd: int | None, error: HivememError | None = None) -> None:
    """Tell the starting client `ready` or the error, on the pipe it gave us."""
    if fd is None:
        return
    line = "ready\n" if error is None else json.dumps(error.to_wire()) + "\n"
    try:
        os.write(fd, line.encode())
        os.close(fd)
    except OSError:
        pass


def progress(fd: int | None, line: str) -> None:
    """A progress line for the starting client (a migration at work); it waits on while they come."""
    if fd is None:
        return
    with contextlib.suppress(OSError):  # a starter that gave up has closed its end
        os.write(fd, f"progress {line}\n".encode())


class Log:
    """One line per event in logs/daemon.log (0600)."""

    def __init__(self, where: paths.Paths) -> None:
        self.path = os.path.join(where.logs, "daemon.log")

    def write(self, message: str) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(f"{now()} [{os.getpid()}] {message}\n")
        except OSError:
            pass


def idle_seconds(config: Config) -> float:
    return float(config["daemon.idle_timeout_ms"]) / 1000.0
