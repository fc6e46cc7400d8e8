"""The socket is trusted only after it is verified (docs/schema.md, docs/protocol.md): its directory, and the peer's
uid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from conftest import Home, fails, wait_for
from test_daemon import daemons, popen_cli

NOBODY = 65534
A_TOKEN = "hm1.g1." + "A" * 43  # any token: what matters is that it never leaves the process
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user (setuid, chown)")


def socket_dir(home: Home) -> str:
    return os.path.dirname(home.paths.socket)


def as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


class ForeignListener:
    """A socket bound by this user (root) at the store's socket path, listening as uid nobody; counts what it gets."""

    def __init__(self, path: str) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        ready_r, ready_w = os.pipe()
        self.got_r, got_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child never returns into pytest
            os.close(ready_r)
            os.close(self.got_r)
            self._serve(sock, ready_w, got_w)
        sock.close()
        os.close(ready_w)
        os.close(got_w)
        assert os.read(ready_r, 1) == b"L"
        os.close(ready_r)

    @staticmethod
    def _serve(sock: socket.socket, ready_w: int, got_w: int) -> None:
        received = -1
        try:
            as_nobody()
            sock.listen(8)  # SO_PEERCRED reports the credentials of the process that called listen()
            os.write(ready_w, b"L")
            sock.settimeout(30)
            conn, _ = sock.accept()
            conn.settimeout(30)
            received = 0
            while chunk := conn.recv(65536):
                received += len(chunk)
        finally:
            os.write(got_w, f"{received}\n".encode())
            os._exit(0)

    def received(self) -> int:
        """Bytes the listener read from its first connection before the client closed it."""
        data = b""
        while chunk := os.read(self.got_r, 64):
            data += chunk
        os.close(self.got_r)
        os.waitpid(self.pid, 0)
        return int(data)


@pytest.fixture
def foreign(home: Home) -> Iterator[ForeignListener]:
    os.makedirs(socket_dir(home), mode=0o700)
    listener = ForeignListener(home.paths.socket)
    try:
        yield listener
    finally:
        try:
            os.kill(listener.pid, 9)
            os.waitpid(listener.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@needs_root
@pytest.mark.parametrize("token", ["@owner", A_TOKEN])
def test_a_foreign_listener_receives_zero_bytes_and_the_cli_exits_4(
    home: Home, foreign: ForeignListener, token: str
) -> None:
    error = fails(home, "memory", "add", "--space", "user", "--content", "for my daemon only",
                  code="denied.peer", exit_code=4, token=token)  # fmt: skip
    assert foreign.received() == 0
    assert error["data"]["path"] == home.paths.socket
    assert error["data"]["peer_uid"] == NOBODY
    assert home.daemon_pid() is None
    assert not os.path.exists(home.paths.owner_key) and not os.path.exists(home.paths.store)


@needs_root
def test_ping_refuses_a_foreign_listener_too(home: Home, foreign: ForeignListener) -> None:
    fails(home, "ping", code="denied.peer", exit_code=4)
    assert foreign.received() == 0


@needs_root
def test_a_hook_sends_nothing_to_a_foreign_listener_and_fails_open(home: Home, foreign: ForeignListener) -> None:
    result = home.cli("hook", "session-start", stdin=f'{{"session_id": "x", "cwd": "{home.base}"}}', token=A_TOKEN)
    assert (result.code, result.out) == (0, "")
    assert foreign.received() == 0


def squat(home: Home, how: str) -> str:
    """Make the socket directory the way a hostile or careless party would; return its path."""
    path = socket_dir(home)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if how == "symlink":
        target = os.path.join(home.base, "elsewhere")
        os.mkdir(target, 0o700)
        os.symlink(target, path)
        return path
    os.mkdir(path)
    os.chmod(path, {"foreign": 0o700, "world": 0o777, "group": 0o750}[how])
    if how == "foreign":
        os.chown(path, NOBODY, NOBODY)
    return path


SQUATS = [
    pytest.param("foreign", marks=needs_root),
    "world",
    "group",
    "symlink",
]


def nothing_inside(home: Home, path: str) -> None:
    assert os.listdir(os.path.realpath(path)) == []
    assert home.daemon_pid() is None
    assert not os.path.exists(home.paths.store)


@pytest.mark.parametrize("how", SQUATS)
def test_the_cli_refuses_an_unsafe_socket_dir_and_creates_nothing_in_it(home: Home, how: str) -> None:
    path = squat(home, how)
    error = fails(home, "memory", "add", "--space", "user", "--content", "squatted", code="failed.socket_dir",
                  exit_code=1)  # fmt: skip
    assert error["data"]["path"] == path
    assert error["data"]["fix"]
    nothing_inside(home, path)
    for command in ("ping", "stop"):
        fails(home, command, code="failed.socket_dir", exit_code=1)


@pytest.mark.parametrize("how", SQUATS)
def test_the_daemon_refuses_an_unsafe_socket_dir_and_never_listens(home: Home, how: str) -> None:
    path = squat(home, how)
    result = home.cli("serve", timeout=30)
    assert result.code == 1, result
    assert "failed.socket_dir" in result.err
    nothing_inside(home, path)
    assert '"code": "failed.socket_dir"' in home.daemon_log()


def test_the_socket_dir_is_created_0700_when_missing(home: Home) -> None:
    home.ok("whoami")
    st = os.lstat(socket_dir(home))
    assert (st.st_uid, st.st_mode & 0o777) == (os.getuid(), 0o700)


@needs_root
def test_the_daemon_closes_a_connection_from_another_uid_without_answering(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "already here")
    directory = socket_dir(home)
    # Let nobody reach the socket at all, so only the daemon's own check stands in the way.
    for path, mode in ((home.base, 0o711), (os.path.dirname(directory), 0o711), (directory, 0o711),
                       (home.paths.socket, 0o666)):  # fmt: skip
        os.chmod(path, mode)
    script = (
        "import os, socket, sys\n"
        f"os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])\n"
        "try:\n"
        '    s.sendall(b\'{"id":1,"verb":"hello","params":{}}\\n\')\n'
        "    print(len(s.recv(65536)))\n"
        "except ConnectionError:\n"  # closed with our line unread: Linux answers with a reset
        "    print(0)\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", script, home.paths.socket], capture_output=True, timeout=60,
                              check=False)  # fmt: skip
    finally:
        for path in (home.base, os.path.dirname(directory), directory):
            os.chmod(path, 0o700)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == b"0"  # closed, nothing answered
    assert home.ok("store", "status")["memories"] == 1
    assert f"refused a connection from uid {NOBODY}" in home.daemon_log()


def test_a_clean_stop_removes_the_socket_lock(home: Home) -> None:
    home.ok("whoami")
    assert os.path.exists(home.paths.socket_lock)
    assert home.ok("stop") == {"stopping": True}
    assert wait_for(lambda: not os.path.exists(home.paths.socket_lock), 10)
    assert home.ok("memory", "add", "--space", "user", "--content", "after a clean stop")["changed"] is True
    assert home.daemon_pid() is not None


def test_racing_starts_after_a_clean_stop_still_make_one_daemon(home: Home) -> None:
    home.ok("whoami")
    home.ok("stop")
    assert wait_for(lambda: not os.path.exists(home.paths.socket_lock), 10)
    procs = [popen_cli(home, "memory", "add", "--space", "user", "--content", f"race {i}", "--json") for i in range(6)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [o[1] for o in outs]
    assert wait_for(lambda: len(daemons(home)) == 1, 10), daemons(home)
    assert home.ok("store", "status")["memories"] == 6


def test_three_thousand_idle_connections_pass_the_peer_check_and_the_daemon_keeps_serving(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "still here")
    idle = []
    try:
        for _ in range(3000):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            idle.append(sock)
            sock.connect(home.paths.socket)
        assert home.ok("store", "status")["memories"] == 1
        idle[0].sendall(b'{"id":1,"verb":"hello","params":{}}\n')  # the first one is still served, not dropped
        idle[0].settimeout(30)
        assert b'"ok"' in idle[0].recv(65536)
    finally:
        for sock in idle:
            sock.close()
    assert home.ok("memory", "add", "--space", "user", "--content", "after the crowd")["changed"] is True
    assert "refused a connection" not in home.daemon_log()
