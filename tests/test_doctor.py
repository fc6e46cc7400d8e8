"""`hivemem doctor` (SPEC 12.3, C01): its checks, their failures, and that it never starts the daemon."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

import pytest

from conftest import Home

IDS = {
    "store.open",
    "store.schema",
    "store.sqlite",
    "store.permissions",
    "store.integrity",
    "daemon.status",
    "git.tracked",
}


def doctor(home: Home, cwd: str | None = None) -> tuple[int, dict[str, Any], dict[str, dict[str, str]]]:
    result = home.cli("doctor", "--json", token=None, cwd=cwd)
    report = result.json
    assert set(report) == {"status", "checks"}
    for c in report["checks"]:
        assert set(c) == {"id", "status", "message", "fix"}, c
        assert c["status"] in ("ok", "warn", "fail")
    assert result.code == report["status"]
    return result.code, report, {c["id"]: c for c in report["checks"]}


def test_doctor_on_a_fresh_home_passes_and_starts_nothing(home: Home) -> None:
    code, report, checks = doctor(home)
    assert checks.keys() >= IDS
    assert (code, report["status"]) == (0, 0), report
    assert home.paths.store in checks["store.open"]["message"]
    assert "not running" in checks["daemon.status"]["message"]
    assert home.daemon_pid() is None
    assert not os.path.exists(home.paths.socket) and not os.path.exists(home.paths.store)


def test_doctor_reports_path_schema_and_daemon(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "doctor me")
    code, _, checks = doctor(home)
    assert code == 0
    assert home.paths.store in checks["store.open"]["message"]
    assert re.search(r"\b2\b", checks["store.schema"]["message"]), checks["store.schema"]
    assert "running" in checks["daemon.status"]["message"] and "not" not in checks["daemon.status"]["message"]
    assert re.search(r"3\.\d+\.\d+", checks["store.sqlite"]["message"]) and checks["store.sqlite"]["status"] == "ok"
    home.stop_daemon()
    code, _, checks = doctor(home)
    assert code == 0
    assert checks["store.integrity"]["status"] == "ok" and "ok" in checks["store.integrity"]["message"]
    assert "not running" in checks["daemon.status"]["message"]
    assert home.daemon_pid() is None


def test_group_readable_directory_fails_permissions(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "loose modes")
    home.stop_daemon()
    os.chmod(home.paths.data_dir, 0o750)
    code, report, checks = doctor(home)
    assert (code, report["status"]) == (1, 1)
    assert checks["store.permissions"]["status"] == "fail"
    assert home.paths.data_dir in checks["store.permissions"]["message"]
    assert checks["store.permissions"]["fix"]
    os.chmod(home.paths.data_dir, 0o700)
    assert doctor(home)[0] == 0


def git(repo: str, *args: str) -> None:
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, timeout=30)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_repository_tracking_a_store_fails(home: Home) -> None:
    repo = os.path.join(home.base, "repo")
    os.mkdir(repo)
    git(repo, "init", "-q")
    with open(os.path.join(repo, "notes.txt"), "w") as f:
        f.write("harmless\n")
    git(repo, "add", "notes.txt")
    code, _, checks = doctor(home, cwd=repo)
    assert code == 0 and checks["git.tracked"]["status"] == "ok"
    os.makedirs(os.path.join(repo, "data"))
    with open(os.path.join(repo, "data", "store.db"), "wb") as f:
        f.write(b"SQLite format 3\x00")
    git(repo, "add", "data/store.db")
    code, report, checks = doctor(home, cwd=repo)
    assert (code, report["status"]) == (1, 1)
    assert checks["git.tracked"]["status"] == "fail"
    assert "data/store.db" in checks["git.tracked"]["message"]


def test_doctor_fails_on_a_refused_store(home: Home) -> None:
    os.makedirs(home.paths.data_dir, mode=0o700)
    with open(os.open(home.paths.store, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(b"not a database\n" * 10)
    code, _, checks = doctor(home)
    assert code == 1
    assert checks["store.schema"]["status"] == "fail"
    assert home.daemon_pid() is None


def test_store_status_shows_the_sqlite_version(home: Home) -> None:
    status = home.ok("store", "status")
    major, minor = (int(x) for x in status["sqlite_version"].split(".")[:2])
    assert (major, minor) >= (3, 42)
    assert (status["schema_version"], status["path"]) == (2, home.paths.store)


def test_a_corrupt_store_fails_the_integrity_check_with_a_fix_that_exists(home: Home) -> None:
    for i in range(40):
        home.ok("memory", "add", "--space", "user", "--content", f"doctor corruption {i} " + "words " * 60)
    home.stop_daemon()
    with open(home.paths.store, "rb") as f:
        page = int.from_bytes(f.read(18)[16:18], "big")  # the page size, from the SQLite file header
    pages = os.path.getsize(home.paths.store) // page
    assert pages > 4
    with open(home.paths.store, "r+b") as f:
        f.seek(page * (pages // 2))
        f.write(b"\xa5" * page)
    code, report, checks = doctor(home)
    assert (code, report["status"]) == (1, 1)
    assert checks["store.integrity"]["status"] == "fail", checks["store.integrity"]
    assert (
        checks["store.integrity"]["fix"]
        and os.path.join(home.paths.data_dir, "backups") in checks["store.integrity"]["fix"]
    )
    assert home.daemon_pid() is None
    # The quick check only sees pages: the fix points to the full check and to restoring a backup.
    assert "hivemem store check" in checks["store.integrity"]["fix"]
    assert "hivemem store restore" in checks["store.integrity"]["fix"]
