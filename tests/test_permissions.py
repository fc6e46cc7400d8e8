"""File modes and link checks (docs/schema.md; conformance C16): 0600 files and 0700 directories whatever the umask;
a symlinked store or key is refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from conftest import Home, Result

ROOTS = ("data", "state", "run", "config")


def cli_under_umask(home: Home, umask: str, *args: str) -> Result:
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    script = f'umask {umask}; exec "$0" -m hivemem "$@"'
    proc = subprocess.run(["sh", "-c", script, sys.executable, *args, "--json"], env=env, cwd=home.base,
                          capture_output=True, timeout=60, check=False)  # fmt: skip
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def loose_modes(home: Home) -> list[tuple[str, str]]:
    """Every path under the home's XDG roots whose mode is not 0700 (dirs) or 0600 (everything else)."""
    bad = []
    for root in (os.path.join(home.base, r) for r in ROOTS):
        if not os.path.exists(root):
            continue
        for base, dirs, files in os.walk(root):
            for path in [base] + [os.path.join(base, n) for n in dirs + files]:
                mode = os.lstat(path).st_mode
                want = 0o700 if stat.S_ISDIR(mode) else 0o600
                if stat.S_IMODE(mode) != want:
                    bad.append((path, oct(stat.S_IMODE(mode))))
    return bad


def walked(home: Home) -> set[str]:
    return {
        os.path.relpath(os.path.join(base, n), home.base)
        for r in ROOTS
        for base, dirs, files in os.walk(os.path.join(home.base, r))
        for n in dirs + files
    }


@pytest.mark.parametrize("umask", ["022", "000"])
def test_round_trip_creates_only_private_files(home: Home, umask: str) -> None:
    for args in (
        ("memory", "add", "--space", "user", "--content", "modes matter"),
        ("memory", "add", "--space", "user", "--content", "to be purged"),
        ("memory", "search", "--query", "modes"),
        ("memory", "purge", "--id", "m2"),
        ("store", "export"),
        ("store", "repair-fts", "--apply", "--confirm"),
        ("store", "backup", "--path", os.path.join(home.base, "data", "copy.db")),
        ("stop",),
        ("store", "restore", "--path", os.path.join(home.base, "data", "copy.db")),
    ):
        result = cli_under_umask(home, umask, *args)
        assert result.code == 0, (args, result)
    exported = next(n for n in walked(home) if n.startswith("data/hivemem/exports/"))
    assert cli_under_umask(home, umask, "store", "import", "--path", os.path.join(home.base, exported)).code == 0
    names = walked(home)
    assert any(n.startswith("data/hivemem/backups/store.db.bak-repair-") for n in names), sorted(names)
    assert any(n.startswith("data/hivemem/backups/store.db.bak-restore-") for n in names), sorted(names)
    for expected in ("data/hivemem/store.db", "data/hivemem/owner.key", "state/hivemem/logs"):
        assert expected in names, sorted(names)
    assert any(n.endswith(".sock") for n in names), sorted(names)
    assert loose_modes(home) == []
    assert cli_under_umask(home, umask, "stop").code == 0
    assert loose_modes(home) == []


def test_symlinked_store_is_refused(home: Home) -> None:
    elsewhere = os.path.join(home.base, "elsewhere")
    os.mkdir(elsewhere, 0o700)
    target = os.path.join(elsewhere, "target.db")
    os.makedirs(home.paths.data_dir, mode=0o700)
    os.symlink(target, home.paths.store)
    result = home.cli("memory", "add", "--space", "user", "--content", "through a link", "--json")
    assert result.code != 0, result
    assert "error" in result.json
    assert os.listdir(elsewhere) == []
    assert os.path.islink(home.paths.store)
    assert home.daemon_pid() is None


def test_symlinked_owner_key_is_refused(home: Home) -> None:
    home.ok("whoami")
    home.stop_daemon()
    decoy = os.path.join(home.base, "decoy.key")
    os.rename(home.paths.owner_key, decoy)
    os.symlink(decoy, home.paths.owner_key)
    result = home.cli("memory", "add", "--space", "user", "--content", "key through a link", "--json")
    assert result.code != 0, result
    assert home.daemon_pid() is None
