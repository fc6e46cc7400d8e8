"""`hivemem doctor` (docs/operations.md; conformance C01): its checks, their failures, and that it never starts the
daemon."""

from __future__ import annotations

import json
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
    assert re.search(r"\b3\b", checks["store.schema"]["message"]), checks["store.schema"]
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
    assert (status["schema_version"], status["path"]) == (3, home.paths.store)


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


# A team store's URL (docs/team.md): `store.tls` and `store.credentials` read it as libpq would, without connecting.
REMOTE_PLAIN = [
    "postgresql://db.example.com/hivemem",
    "postgresql://db.example.com:5433/hivemem?sslmode=prefer",
    "postgresql://db.example.com/hivemem?sslmode=allow",
    "postgresql://db.example.com/hivemem?sslmode=disable",
    "postgres://10.1.2.3/hivemem",
    "postgresql://localhost/hivemem?host=db.example.com",  # a host= parameter overrides the URL's host
    "postgresql://localhost,db.example.com/hivemem",  # one host of several leaves the machine
    "postgresql://[2001:db8::5]:5432/hivemem?sslmode=prefer",
    "postgresql://db/hivemem?hostaddr=192.0.2.7",  # hostaddr is where libpq connects
    "host=db.example.com dbname=hivemem",  # libpq's key=value form (docs/decisions.md D345)
    "host=localhost,db.example.com port=5432,5433 dbname=hivemem sslmode=prefer",
    "hostaddr=192.0.2.7 dbname=hivemem",
]
LOCAL_OR_TLS = [
    "postgresql://db.example.com/hivemem?sslmode=verify-full",
    "postgresql://db.example.com/hivemem?sslmode=verify-ca",
    "postgresql://db.example.com/hivemem?sslmode=require",
    "postgresql://db.example.com/hivemem?gssencmode=require",
    "postgresql://localhost/hivemem",
    "postgresql://127.0.0.1:5432/hivemem?sslmode=disable",
    "postgresql://[::1]/hivemem",
    "postgresql:///hivemem",  # no host: libpq's default Unix socket
    "postgresql:///hivemem?host=/var/run/postgresql",
    "postgresql://%2Fvar%2Frun%2Fpostgresql/hivemem",
    "postgresql://db.example.com/hivemem?hostaddr=127.0.0.1",
    "host=db.example.com dbname=hivemem sslmode=verify-full",
    "host=/var/run/postgresql dbname=hivemem",
    "dbname=hivemem",  # no host: libpq's default Unix socket
]


def team_home(home: Home, url: str, **env: str) -> Home:
    """`home` with `store.url` set and only the libpq variables given (none of the test machine's own)."""
    for key in [k for k in home.env if k.startswith("PG")]:
        del home.env[key]
    home.env.update(PGPASSFILE=os.path.join(home.base, "pgpass"), PGSERVICEFILE=os.path.join(home.base, "pgsvc"))
    home.env.update(env)
    home.config(f'[store]\nurl = "{url}"\n')
    return home


@pytest.mark.parametrize("url", REMOTE_PLAIN)
def test_a_remote_team_store_without_tls_warns(home: Home, url: str) -> None:
    code, _, checks = doctor(team_home(home, url))
    tls = checks["store.tls"]
    assert tls["status"] == "warn", tls
    assert "without TLS" in tls["message"] and "sslmode=verify-full" in tls["fix"]
    assert code == 0  # a warning, not a failure
    assert home.daemon_pid() is None


@pytest.mark.parametrize("url", LOCAL_OR_TLS)
def test_tls_or_a_loopback_team_store_passes(home: Home, url: str) -> None:
    _, _, checks = doctor(team_home(home, url))
    assert checks["store.tls"]["status"] == "ok", checks["store.tls"]


def test_tls_set_by_the_environment_or_a_service_file_counts(home: Home) -> None:
    url = "postgresql://db.example.com/hivemem"
    _, _, checks = doctor(team_home(home, url, PGSSLMODE="verify-full"))
    assert checks["store.tls"]["status"] == "ok" and "PGSSLMODE" in checks["store.tls"]["message"]
    with open(os.path.join(home.base, "pgsvc"), "w") as f:
        f.write("# team store\n[other]\nsslmode=verify-full\n[team]\nhost=db.example.com\nsslmode=disable\n")
    _, _, checks = doctor(team_home(home, "postgresql:///hivemem?service=team"))
    assert checks["store.tls"]["status"] == "warn" and "service team" in checks["store.tls"]["message"]
    _, _, checks = doctor(team_home(home, "postgresql:///hivemem?service=team&sslmode=verify-full"))
    assert checks["store.tls"]["status"] == "ok"  # the URL's own setting wins over the service file's
    _, _, checks = doctor(team_home(home, "postgresql:///hivemem", PGSERVICE="team"))
    assert checks["store.tls"]["status"] == "warn" and "db.example.com" in checks["store.tls"]["message"]


def test_require_is_tls_but_says_the_server_name_is_not_checked(home: Home) -> None:
    _, _, checks = doctor(team_home(home, "postgresql://db.example.com/hivemem?sslmode=require"))
    assert checks["store.tls"]["status"] == "ok"
    assert "not checked" in checks["store.tls"]["message"] and "verify-full" in checks["store.tls"]["fix"]


def test_no_team_store_means_nothing_to_warn_about(home: Home) -> None:
    code, _, checks = doctor(home)
    assert code == 0
    assert checks["store.tls"]["status"] == checks["store.credentials"]["status"] == "ok"
    assert "store.url is empty" in checks["store.tls"]["message"]


@pytest.mark.parametrize(
    "url",
    [
        # assembled here, so that the repository itself holds no credential-shaped text (K8)
        "postgresql://hive" + ":Sw0rdf1sh-9q@db.example.com/hivemem?sslmode=verify-full",
        "postgresql://db.example.com/hivemem?user=hive&pass" + "word=Sw0rdf1sh-9q&sslmode=verify-full",
        "host=db.example.com user=hive pass" + "word=Sw0rdf1sh-9q sslmode=verify-full",
        "host=db.example.com pass" + "word='Sw0rdf1sh-9q' sslmode=verify-full",
    ],
)
def test_a_password_in_the_url_warns_and_is_never_shown(home: Home, url: str) -> None:
    code, report, checks = doctor(team_home(home, url))
    cred = checks["store.credentials"]
    assert cred["status"] == "warn", cred
    assert "password" in cred["message"] and os.path.join(home.base, "pgpass") in cred["fix"]
    assert code == 0
    text = home.cli("doctor", token=None)
    for out in (str(report), text.out, text.err):
        assert "Sw0rdf1sh-9q" not in out
    assert "store.credentials" in text.out


def test_a_password_file_others_can_read_warns(home: Home) -> None:
    team_home(home, "postgresql://db.example.com/hivemem?sslmode=verify-full")
    pgpass = os.path.join(home.base, "pgpass")
    with open(os.open(pgpass, os.O_WRONLY | os.O_CREAT, 0o644), "w") as f:
        f.write("db.example.com:5432:hivemem:hive:not-shown\n")
    os.chmod(pgpass, 0o644)
    _, _, checks = doctor(home)
    assert (
        checks["store.credentials"]["status"] == "warn" and f"chmod 0600 {pgpass}" == checks["store.credentials"]["fix"]
    )
    os.chmod(pgpass, 0o600)
    _, _, checks = doctor(home)
    assert checks["store.credentials"]["status"] == "ok" and pgpass in checks["store.credentials"]["message"]


def test_config_set_refuses_a_url_with_a_password(home: Home) -> None:
    team_home(home, "postgresql://db.example.com/hivemem?sslmode=verify-full")
    config = os.path.join(home.env["XDG_CONFIG_HOME"], "hivemem", "config.toml")
    with open(config, "rb") as f:
        before = f.read()
    url = "postgresql://hive" + ":Sw0rdf1sh-9q@db.example.com/hivemem?sslmode=verify-full"
    result = home.cli("config", "set", "--key", "store.url", "--value", url, "--json")
    assert result.code == 2, result
    error = json.loads(result.err or result.out)["error"]
    assert error["code"] == "invalid_params.config" and error["data"]["key"] == "store.url"
    assert os.path.join(home.base, "pgpass") in error["data"]["fix"]
    assert "Sw0rdf1sh-9q" not in result.out + result.err
    with open(config, "rb") as f:
        assert f.read() == before
    pair = "host=db.example.com user=hive pass" + "word=Sw0rdf1sh-9q sslmode=verify-full"
    result = home.cli("config", "set", "--key", "store.url", "--value", pair, "--json")
    assert (result.code, result.json["error"]["code"]) == (2, "invalid_params.config"), result
    assert "Sw0rdf1sh-9q" not in result.out + result.err
    good = "postgresql://hive@db.example.com/hivemem?sslmode=verify-full"
    assert home.ok("config", "set", "--key", "store.url", "--value", good)["value"] == good


def test_no_mounted_team_store_means_the_team_checks_pass(home: Home) -> None:
    code, _, checks = doctor(home)
    assert code == 0
    for cid in ("team.reachable", "team.tls", "team.token", "team.schema", "team.moves"):
        assert checks[cid] == {"id": cid, "status": "ok", "message": "no team store mounted: team.url is empty",
                               "fix": ""}  # fmt: skip
