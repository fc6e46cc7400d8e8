"""Failing clearly (docs/protocol.md) on real file systems: a tmpfs that fills up, one remounted read-only,
a store file deleted or replaced under the daemon, start-up failures that say why."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from conftest import Home, fails, raises, wait_for
from hivemem.errors import HivememError

NOBODY = 65534
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None,
    reason="needs root and mount(8) to make real tmpfs file systems (CI runs as root)",
)


class Tmpfs:
    """A small tmpfs of its own, unmounted at the end."""

    def __init__(self, size: str) -> None:
        self.path = tempfile.mkdtemp(prefix="hm-fs-", dir="/tmp")
        mount("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", self.path)

    def remount(self, how: str) -> None:
        mount("-o", f"remount,{how}", self.path)

    def fill(self) -> None:
        """Take every free block with one file."""
        with open(os.path.join(self.path, "ballast"), "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass

    def close(self) -> None:
        subprocess.run(["umount", "-l", self.path], check=False, capture_output=True, timeout=30)
        os.rmdir(self.path)  # fails loudly if the mount is still there


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def fs(home: Home) -> Iterator[Tmpfs]:
    made = Tmpfs("8m")
    try:
        yield made
    finally:
        try:
            home.stop_daemon()
            kill_daemon(home)
        finally:  # never leave a mount behind, whatever the daemon did
            made.close()


def store_on(home: Home, directory: str) -> str:
    store = os.path.join(directory, "store.db")
    home.config(f'[store]\npath = "{store}"\n')
    return store


def kill_daemon(home: Home) -> None:
    pid = home.daemon_pid()
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: gone(pid), 10)


def gone(pid: int) -> bool:
    """Dead with its files closed: no process, or a zombie whose every thread has exited (a killed
    thread group's leader shows as a zombie while its other threads still hold the files)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                return False
        return len(os.listdir(f"/proc/{pid}/task")) <= 1 and not os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True


def start_failure(home: Home, cause: str, code: str = "failed.daemon_start", exit_code: int = 1) -> dict[str, Any]:
    """A call that starts a daemon, which must fail with `code` and `cause`; the log has the same line."""
    error = fails(home, "memory", "list", code=code, exit_code=exit_code)
    assert error["data"]["cause"] == cause, error
    assert error["data"]["path"] and error["data"]["fix"], error
    assert "exited before" not in error["message"]
    assert f"start failed: {json.dumps(error, ensure_ascii=False)}" in home.daemon_log()
    assert home.daemon_pid() is None
    return error


def count(home: Home) -> int:
    return int(home.ok("store", "status")["memories"])


# ---------------------------------------------------------------- read-only


@pytest.mark.parametrize("stop", ["stop", "kill -9"])
def test_a_store_on_a_read_only_file_system_serves_reads_and_refuses_writes(home: Home, fs: Tmpfs, stop: str) -> None:
    store_on(home, fs.path)
    ids = [home.ok("memory", "add", "--space", "user", "--content", f"kept {i} {stop}")["id"] for i in range(3)]
    if stop == "stop":
        home.ok("stop")
        assert wait_for(lambda: home.daemon_pid() is None, 10)
    else:
        kill_daemon(home)  # leaves the WAL, with the last adds only in it
    fs.remount("ro")
    assert [m["id"] for m in home.ok("memory", "list")["memories"]] == ids[::-1]
    assert home.ok("memory", "get", "--id", ids[0])["revision"] == 1
    assert [h["id"] for h in home.ok("memory", "search", "--query", "kept")["results"]] != []
    error = fails(home, "memory", "add", "--space", "user", "--content", "not now", code="unavailable.read_only",
                  exit_code=6)  # fmt: skip
    assert error["data"]["fix"]
    fails(home, "memory", "delete", "--id", ids[0], "--revision", "1", code="unavailable.read_only", exit_code=6)
    assert count(home) == 3
    assert "read-only" in home.daemon_log()


def test_a_read_only_file_system_without_a_store_says_why_it_cannot_start(home: Home, fs: Tmpfs) -> None:
    store = store_on(home, os.path.join(fs.path, "sub"))
    fs.remount("ro")
    error = start_failure(home, "read_only")
    assert error["data"]["path"] in (store, os.path.dirname(store))


def test_a_read_only_store_file_bind_mounted_is_served_read_only(home: Home, fs: Tmpfs) -> None:
    store = store_on(home, fs.path)
    home.ok("memory", "add", "--space", "user", "--content", "one file read-only")
    home.ok("stop")
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    mount("--bind", store, store)
    try:
        mount("-o", "remount,ro,bind", store)
        assert count(home) == 1
        fails(home, "memory", "add", "--space", "user", "--content", "no", code="unavailable.read_only", exit_code=6)
        home.ok("stop")
        assert wait_for(lambda: home.daemon_pid() is None, 10)
    finally:
        subprocess.run(["umount", "-l", store], check=False, capture_output=True, timeout=30)


# ---------------------------------------------------------------- a full disk


def fill_store(home: Home, fs: Tmpfs) -> list[str]:
    """Add memories over one connection until the disk is full, then take what is left; the acknowledged ids."""
    client = home.client()
    acked: list[str] = []
    try:
        for i in range(10_000):
            try:
                acked.append(client.call("memory.add", space="user", content=f"filler {i} {BIG}")["id"])
            except HivememError as exc:
                assert exc.code == "failed.disk_full", exc
                break
        else:
            pytest.fail("the disk never filled up")
        fs.fill()
        assert raises(client, "memory.add", space="user", content=f"one more {BIG}").code == "failed.disk_full"
        assert client.call("store.status")["memories"] == len(acked)  # reads go on, on the same daemon
        assert client.call("memory.get", id=acked[-1])["id"] == acked[-1]
    finally:
        client.close()
    return acked


BIG = "x" * 60_000


def test_a_full_disk_fails_the_write_keeps_every_acknowledged_one_and_restarts_after_kill_9(
    home: Home, fs: Tmpfs
) -> None:
    store_on(home, fs.path)
    acked = fill_store(home, fs)
    assert len(acked) > 10
    error = fails(home, "memory", "add", "--space", "user", "--content", f"cli {BIG}", code="failed.disk_full",
                  exit_code=1)  # fmt: skip
    assert error["data"]["fix"]
    kill_daemon(home)
    assert count(home) == len(acked)  # a new daemon started on the full disk
    listed = home.ok("memory", "list", "--limit", "200")["memories"]
    assert [m["id"] for m in listed] == acked[::-1][:200]
    assert home.ok("memory", "search", "--query", "filler")["results"]
    fails(home, "memory", "add", "--space", "user", "--content", f"again {BIG}", code="failed.disk_full", exit_code=1)
    assert count(home) == len(acked)


def test_a_disk_full_before_the_store_exists_says_so(home: Home, fs: Tmpfs) -> None:
    store_on(home, os.path.join(fs.path, "data"))
    os.mkdir(os.path.join(fs.path, "data"), 0o700)
    fs.fill()
    start_failure(home, "disk_full")


def test_space_freed_lets_writes_continue(home: Home, fs: Tmpfs) -> None:
    store_on(home, fs.path)
    home.ok("memory", "add", "--space", "user", "--content", "first")
    fs.fill()
    fails(home, "memory", "add", "--space", "user", "--content", "y" * 60_000, code="failed.disk_full", exit_code=1)
    os.unlink(os.path.join(fs.path, "ballast"))
    assert home.ok("memory", "add", "--space", "user", "--content", "y" * 60_000)["changed"] is True
    assert count(home) == 2


# ---------------------------------------------------------------- a store moved under the daemon


@pytest.mark.parametrize("how", ["deleted", "renamed", "replaced"])
def test_a_store_moved_under_the_daemon_refuses_the_next_write_and_the_daemon_exits(home: Home, how: str) -> None:
    store = home.paths.store
    first = home.ok("memory", "add", "--space", "user", "--content", "before the move")["id"]
    pid = home.daemon_pid()
    aside = store + ".aside"
    if how == "deleted":
        os.unlink(store)
    elif how == "renamed":
        os.rename(store, aside)
    else:
        home.ok("stop")  # a complete copy to put in its place, then a daemon on the original again
        assert wait_for(lambda: home.daemon_pid() is None, 10)
        shutil.copy(store, aside)
        home.ok("whoami")
        pid = home.daemon_pid()
        os.replace(aside, store)
    error = fails(home, "memory", "add", "--space", "user", "--content", "after the move", code="failed.store_moved",
                  exit_code=1)  # fmt: skip
    assert error["data"]["path"] == store
    assert pid is not None and wait_for(lambda: gone(pid), 10), "the daemon kept running"
    assert "failed.store_moved" in home.daemon_log()
    after = home.ok("memory", "list")["memories"]  # a new daemon, on the file now at the path
    assert "after the move" not in json.dumps(after)
    assert [m["id"] for m in after] == ([first] if how == "replaced" else [])
    assert home.ok("memory", "add", "--space", "user", "--content", "on the new file")["changed"] is True
    assert count(home) == len(after) + 1


def test_connections_opened_after_the_store_moved_are_told_so(home: Home) -> None:
    """Hellos at once, after a rename, land on reader threads with no connection yet: each opens one on the path,
    which must answer failed.store_moved (not a bare store error), and the daemon then exits."""
    home.ok("memory", "add", "--space", "user", "--content", "before the move")
    pid = home.daemon_pid()
    os.rename(home.paths.store, home.paths.store + ".aside")
    codes: list[str] = []

    def hello() -> None:
        client = home.client(start=False)
        try:
            client.connect()
            client.call("memory.add", space="user", content="after the move")
        except HivememError as exc:
            codes.append(exc.code)
        finally:
            client.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: hello(), range(8)))
    assert codes and set(codes) <= {"failed.store_moved", "unavailable.daemon_gone", "unavailable.not_running"}
    assert "failed.store_moved" in codes
    assert pid is not None and wait_for(lambda: gone(pid), 10), "the daemon kept running"


def test_a_moved_store_keeps_what_was_acknowledged_before_the_move(home: Home) -> None:
    store = home.paths.store
    ids = [home.ok("memory", "add", "--space", "user", "--content", f"acked {i}")["id"] for i in range(5)]
    aside = store + ".aside"
    os.rename(store, aside)
    fails(home, "memory", "add", "--space", "user", "--content", "refused", code="failed.store_moved", exit_code=1)
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    os.replace(aside, store)  # the person moves it back
    assert [m["id"] for m in home.ok("memory", "list")["memories"]] == ids[::-1]


# ---------------------------------------------------------------- start-up failures say why


def test_a_store_directory_owned_by_another_user_is_a_permission_failure(home: Home) -> None:
    shared = os.path.join(home.base, "shared")
    os.mkdir(shared, 0o700)
    os.chown(shared, NOBODY, NOBODY)
    store_on(home, shared)
    assert start_failure(home, "permission")["data"]["path"] == shared
    assert os.listdir(shared) == []


@pytest.mark.parametrize(("mode", "starts"), [(0o755, True), (0o750, True), (0o777, False), (0o770, False)])
def test_the_daemon_never_chmods_a_directory_it_did_not_create(home: Home, mode: int, starts: bool) -> None:
    mine = os.path.join(home.base, "mine")
    os.mkdir(mine)
    os.chmod(mine, mode)
    store_on(home, mine)
    if starts:
        home.ok("memory", "add", "--space", "user", "--content", "in my own directory")
    else:
        assert start_failure(home, "permission")["data"]["path"] == mine
        assert os.listdir(mine) == []
    assert os.stat(mine).st_mode & 0o777 == mode


def test_a_newer_schema_keeps_its_code_and_gains_a_cause(home: Home) -> None:
    home.ok("whoami")
    home.stop_daemon()
    import apsw

    conn = apsw.Connection(home.paths.store)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    error = start_failure(home, "schema", code="unsupported.store_schema", exit_code=10)
    assert (error["data"]["found"], error["data"]["path"]) == (99, home.paths.store)


def test_a_corrupt_store_says_corrupt(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "soon unreadable")
    home.ok("stop")
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    with open(home.paths.store, "r+b") as f:  # keep the 100-byte header, garble the schema page
        f.seek(100)
        f.write(b"\xa5" * 3000)
    start_failure(home, "corrupt")


def test_serve_by_hand_prints_the_same_error(home: Home) -> None:
    shared = os.path.join(home.base, "shared")
    os.mkdir(shared, 0o777)
    os.chmod(shared, 0o777)
    store_on(home, shared)
    result = home.cli("serve", timeout=30)
    assert result.code == 1, result
    assert "failed.daemon_start" in result.err
