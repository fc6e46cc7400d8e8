"""A base install (`pip install .`) without the optional extras (docs/decisions.md D346): the single-machine path
works, and a feature that needs an extra says which one to install.

The extras are hidden by a `sitecustomize` on PYTHONPATH whose import hook refuses them, in the CLI and in the
daemon it starts: a real import failure in real processes, as in an environment that lacks the packages."""

from __future__ import annotations

import json
import os

import pytest

from conftest import Home, fails

TEAM = "pip install 'hivemem[team]'"
BLOCKER = """
import sys

BLOCKED = {blocked!r}


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Refuse())
"""


def without(home: Home, *packages: str) -> Home:
    """`home`, whose processes cannot import `packages`."""
    folder = os.path.join(home.base, "without")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
        f.write(BLOCKER.format(blocked=set(packages)))
    home.env["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, home.env.get("PYTHONPATH", "")]))
    probe = home.cli("config", "get", "--key", "store.url", "--json")
    assert probe.code == 0, probe
    return home


def test_the_quick_start_needs_neither_the_team_driver_nor_numpy(home: Home) -> None:
    """README's first command on the embedded store, in processes that cannot import psycopg or NumPy."""
    without(home, "psycopg", "psycopg_binary", "numpy")
    assert home.ok("memory", "add", "--space", "user", "--content", "hivemem keeps agent memories in SQLite")["id"]
    found = home.ok("memory", "search", "--query", "where are memories kept")
    assert [m["id"] for m in found["results"]] == ["m1"] and found["mode"] == "fts"
    code, checks = doctor(home)
    assert code == 0, checks
    assert checks["store.tls"]["status"] == "ok"


def doctor(home: Home) -> tuple[int, dict[str, dict[str, str]]]:
    """`hivemem doctor`'s exit code and its checks by id."""
    result = home.cli("doctor", "--json", token=None)
    return result.code, {c["id"]: c for c in json.loads(result.out)["checks"]}


@pytest.mark.parametrize("url", ["postgresql://127.0.0.1/hivemem", "host=127.0.0.1 dbname=hivemem"])
def test_a_team_store_without_its_driver_names_the_extra_to_install(home: Home, url: str) -> None:
    without(home, "psycopg", "psycopg_binary")
    home.config(f'[store]\nurl = "{url}"\n')
    error = fails(home, "memory", "search", "--query", "x", code="unsupported.store_driver", exit_code=10)
    assert error["data"]["fix"] == TEAM and TEAM in error["message"]
    assert home.daemon_pid() is None  # the daemon said why and exited
    human = home.cli("memory", "list")
    assert human.code == 10 and f"fix: {TEAM}" in human.err
    refused = fails(home, "config", "set", "--key", "store.url", "--value", "host=db.example.com dbname=x",
                    code="unsupported.store_driver", exit_code=10)  # fmt: skip
    assert refused["data"]["fix"] == TEAM
    _, checks = doctor(home)
    assert checks["store.tls"]["status"] == "fail" and checks["store.tls"]["fix"] == TEAM


def test_embeddings_without_numpy_say_which_extra_and_full_text_goes_on(home: Home) -> None:
    without(home, "numpy")
    home.config('[embeddings]\nprovider = "http"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    home.ok("memory", "add", "--space", "user", "--content", "full text still finds this")
    assert home.ok("memory", "search", "--query", "finds")["mode"] == "fts"
    with open(os.path.join(home.env["XDG_STATE_HOME"], "hivemem", "logs", "daemon.log")) as f:
        assert "embeddings need NumPy: pip install 'hivemem[embeddings]'" in f.read()
    code, checks = doctor(home)
    assert code != 0 and checks["embeddings.provider"]["status"] == "fail"
    assert checks["embeddings.provider"]["fix"] == "pip install 'hivemem[embeddings]'"
    home.stop_daemon()
    home.config('[embeddings]\nprovider = "local"\n')
    local = doctor(home)[1]["embeddings.provider"]
    assert (local["status"], local["fix"]) == ("fail", "pip install 'hivemem[local]'")
