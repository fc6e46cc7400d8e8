"""The daemon's life (docs/protocol.md; conformance C03, C10): on-demand start, one daemon per store, idle stop,
serve/stop/ping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from conftest import Home, wait_for
from hivemem.errors import HivememError


def _proc_read(pid: str, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def environ_of(pid: int | str) -> dict[str, str]:
    raw = _proc_read(str(pid), "environ")
    pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def daemons(home: Home) -> list[int]:
    """Every live `hivemem serve` process whose environment points at this home's data dir."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        args = _proc_read(pid, "cmdline").split(b"\0")
        if (
            b"hivemem" in args
            and b"serve" in args
            and environ_of(pid).get("XDG_DATA_HOME") == home.env["XDG_DATA_HOME"]
        ):
            found.append(int(pid))
    return found


def popen_cli(home: Home, *args: str, token: str | None = "@owner", pipe: bool = True) -> subprocess.Popen[bytes]:
    env = dict(home.env)
    if token is not None:
        env["HIVEMEM_TOKEN"] = token
    out = subprocess.PIPE if pipe else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, "-m", "hivemem", *args], env=env, cwd=home.base, stdout=out, stderr=out)


def error_of(result: object) -> dict[str, object]:
    error: dict[str, object] = result.json["error"]  # type: ignore[attr-defined]
    return error


def test_racing_first_calls_make_exactly_one_daemon(home: Home, record_property: Callable[[str, object], None]) -> None:
    started = time.monotonic()
    procs = [popen_cli(home, "memory", "add", "--space", "user", "--content", f"race {i}", "--json") for i in range(6)]
    outs = [p.communicate(timeout=60) for p in procs]
    record_property("racing_first_calls_seconds", round(time.monotonic() - started, 3))
    assert [p.returncode for p in procs] == [0] * 6, [o[1] for o in outs]
    assert wait_for(lambda: len(daemons(home)) == 1, 10), daemons(home)
    assert daemons(home) == [home.daemon_pid()]
    assert home.ok("store", "status")["memories"] == 6


def test_first_on_demand_call_latency_is_recorded(home: Home, record_property: Callable[[str, object], None]) -> None:
    started = time.monotonic()
    home.ok("memory", "add", "--space", "user", "--content", "first call")
    record_property("first_on_demand_call_seconds", round(time.monotonic() - started, 3))
    started = time.monotonic()
    home.ok("memory", "get", "--id", "m1")
    record_property("warm_call_seconds", round(time.monotonic() - started, 3))
    assert home.daemon_pid() is not None


def test_idle_daemon_exits_and_next_call_starts_a_new_one(home: Home) -> None:
    home.config("[daemon]\nidle_timeout_ms = 1000\n")
    home.ok("memory", "add", "--space", "user", "--content", "idle test")
    first = home.daemon_pid()
    assert first is not None
    client = home.client()
    try:
        client.call("whoami")
        # A held connection keeps it alive well past the idle timer.
        assert not wait_for(lambda: home.daemon_pid() is None, 2.5)
    finally:
        client.close()
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    assert wait_for(lambda: not os.path.exists(home.paths.socket), 5)
    assert home.ok("memory", "get", "--id", "m1")["content"] == "idle test"
    second = home.daemon_pid()
    assert second is not None and second != first


def test_daemon_detaches_from_the_caller(home: Home) -> None:
    workdir = os.path.join(home.base, "somewhere")
    os.mkdir(workdir)
    home.ok("memory", "add", "--space", "user", "--content", "cwd test", cwd=workdir)
    pid = home.daemon_pid()
    assert pid is not None
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    env = environ_of(pid)
    assert env.get("XDG_DATA_HOME") == home.env["XDG_DATA_HOME"]
    assert "HIVEMEM_TOKEN" not in env
    assert os.getsid(pid) == pid
    assert [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1, 2)] == ["/dev/null"] * 3


def test_serve_by_hand_while_a_daemon_runs_is_store_locked(home: Home) -> None:
    home.ok("whoami")
    pid = home.daemon_pid()
    result = home.cli("serve", timeout=20)
    assert result.code == 5, result
    assert "conflict.store_locked" in result.err
    assert home.daemon_pid() == pid


def test_second_daemon_on_the_same_store_through_another_socket_is_refused(home: Home) -> None:
    home.ok("whoami")
    env = dict(home.env, XDG_RUNTIME_DIR=os.path.join(home.base, "run2"))
    proc = subprocess.run([sys.executable, "-m", "hivemem", "serve"], env=env, capture_output=True, timeout=20,
                          check=False)  # fmt: skip
    assert proc.returncode == 5, proc.stderr
    assert b"conflict.store_locked" in proc.stderr


def test_stop_as_owner_is_graceful(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "before stop")
    pid = home.daemon_pid()
    assert pid is not None
    assert home.ok("stop") == {"stopping": True}
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    assert not os.path.exists(home.paths.socket)
    wal = home.paths.store + "-wal"
    assert not os.path.exists(wal) or os.path.getsize(wal) == 0


def test_the_stop_verb_needs_admin_and_the_stop_command_a_signal(home: Home) -> None:
    home.ok("whoami")
    pid = home.daemon_pid()
    unknown = home.client("")
    try:
        with pytest.raises(HivememError) as caught:
            unknown.call("daemon.stop")
        assert caught.value.code == "denied.admin"
    finally:
        unknown.close()
    assert home.daemon_pid() == pid
    assert home.ok("stop", token=None) == {"stopping": True}, "SIGTERM as the same user (docs/security.md)"
    assert home.daemon_pid() is None


def test_ping_and_stop_never_start_a_daemon(home: Home) -> None:
    result = home.cli("ping", "--json")
    assert result.code == 6, result
    assert error_of(result)["code"] == "unavailable.not_running"
    assert home.ok("stop") == {"stopping": False}
    assert home.daemon_pid() is None
    assert not os.path.exists(home.paths.socket)
    assert not os.path.exists(home.paths.store)
    home.ok("whoami")
    assert home.cli("ping", "--json").code == 0


def test_explicit_startup_fails_with_not_running_until_served(home: Home) -> None:
    home.config('[daemon]\nstartup = "explicit"\n')
    result = home.cli("memory", "add", "--space", "user", "--content", "explicit", "--json")
    assert result.code == 6, result
    error = error_of(result)
    assert error["code"] == "unavailable.not_running"
    assert error["data"]["fix"] == "hivemem serve"  # type: ignore[index]
    assert home.daemon_pid() is None and not os.path.exists(home.paths.store)
    server = popen_cli(home, "serve", token=None, pipe=False)
    try:
        assert wait_for(lambda: home.cli("ping").code == 0, 15)
        assert home.ok("memory", "add", "--space", "user", "--content", "explicit")["changed"] is True
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0


@pytest.mark.parametrize(
    ("toml", "key"),
    [('[daemon]\nidle_timeout_ms = "x"\n', "daemon.idle_timeout_ms"), ("[daemon]\nbogus = 1\n", "daemon.bogus")],
)
def test_invalid_config_is_reported_with_its_key_and_no_daemon_starts(home: Home, toml: str, key: str) -> None:
    home.config(toml)
    result = home.cli("memory", "search", "--query", "x", "--json")
    assert result.code == 2, result
    assert error_of(result)["code"] == "invalid_params.config"
    assert error_of(result)["data"]["key"] == key  # type: ignore[index]
    served = home.cli("serve", timeout=20)
    assert served.code == 2, served
    assert "invalid_params.config" in served.err
    assert home.daemon_pid() is None and daemons(home) == []


def test_sigterm_exits_zero_after_checkpointing(home: Home) -> None:
    server = popen_cli(home, "serve", token=None, pipe=False)
    try:
        assert wait_for(lambda: home.cli("ping").code == 0, 15)
        for i in range(20):
            home.ok("memory", "add", "--space", "user", "--content", f"sigterm {i}")
        wal = home.paths.store + "-wal"
        assert os.path.getsize(wal) > 0
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert not os.path.exists(wal) or os.path.getsize(wal) == 0
    assert not os.path.exists(home.paths.socket)
    assert home.ok("store", "status")["memories"] == 20
