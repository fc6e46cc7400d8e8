"""docs/team.md runs as printed on a real PostgreSQL server: its ```sql blocks through psql as the test server's
superuser, its ```sh blocks in order as bash scripts (tests/test_docs_run.py's `script`), each exiting 0, with
this hivemem and PostgreSQL's client tools (psql, pg_dump, pg_restore) on PATH. Where no server answers, the test
skips, or fails under HIVEMEM_REQUIRE_POSTGRES=1 (as CI sets it), as the other team-store tests do.

The guide's text runs with one stated, minimal rewrite (docs/decisions.md D340), since a test cannot use a
reader's server and a reader's server is not a test's:

- every URL `postgresql://ROLE@db.example.com[:5432]/DATABASE?sslmode=verify-full` names the test server's host
  and port and `sslmode=disable` (the test server has no certificate; a loopback connection needs no TLS,
  step 3);
- the roles `hivemem_admin` and `hivemem_app`, and the databases `hivemem` and `hivemem_restored`, get names of
  their own for this run (roles are shared by every database of the server, and tests run side by side);
- psql's `\\password` lines are left out (they ask on a terminal; the test server trusts its connections).

Nothing else changes: the same commands, flags and SQL statements run, in the guide's order. Two machines run the
```sh blocks: the administrator's, in a fresh home, runs them all but the one that starts "on the machine whose
SQLite store moves", which runs on a second machine whose SQLite store already holds a team memory, with the
team's owner.key (the administrator's, as step 5 says to copy it) in its working directory. The guide's marked
blocks (`# not run by the docs test:`, tests/test_docs_examples.py's EXEMPT) are left out."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from conftest import PG_SERVER, pg_database, pg_superuser
from hivemem.manifest import NOT_RUN
from test_docs_run import ROOT, commands, fresh_env, script

GUIDE = "docs/team.md"
BLOCK = re.compile(r"^```(sh|sql)\n(.*?)^```", re.S | re.M)
URL = re.compile(
    r"postgresql://(hivemem_admin|hivemem_app)@db\.example\.com(?::5432)?/(hivemem\w*)\?sslmode=verify-full"
)
DATABASE = re.compile(r"(DATABASE |\\c )(hivemem(?:_restored)?)\b")
ROLE = re.compile(r"\bhivemem_(?:admin|app)\b")
SECOND_MACHINE = "on the machine whose SQLite store moves"
TOOLS = ("psql", "pg_dump", "pg_restore")


def guide_blocks() -> list[tuple[str, str]]:
    """The guide's ```sh and ```sql blocks in order, as (language, text), leaving out those marked as not run."""
    text = (Path(ROOT) / GUIDE).read_text(encoding="utf-8")
    return [(m[1], m[2]) for m in BLOCK.finditer(text) if not m[2].startswith(NOT_RUN)]


def on_test_server(text: str, names: dict[str, str]) -> str:
    """`text` with the module docstring's rewrite: the test server's host and no TLS in every URL, this run's
    names for the roles and databases."""
    server = urlsplit(PG_SERVER)
    where = f"{server.hostname}:{server.port or 5432}"
    text = URL.sub(lambda m: f"postgresql://{names[m[1]]}@{where}/{names[m[2]]}?sslmode=disable", text)
    text = DATABASE.sub(lambda m: m[1] + names[m[2]], text)
    return ROLE.sub(lambda m: names[m[0]], text)


def machine(base: Path, name: str) -> tuple[dict[str, str], Path]:
    """A machine of the team: a fresh home with this hivemem on PATH, and the directory its shell works in."""
    home, work = base / name, base / name / "work"
    work.mkdir(parents=True)
    env = fresh_env(str(home))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    env["XDG_RUNTIME_DIR"] = str(base / f"run-{name}")
    os.mkdir(env["XDG_RUNTIME_DIR"], 0o700)
    return env, work


def run_sh(block: str, env: dict[str, str], cwd: Path) -> None:
    steps = commands(block)
    assert not any("db.example.com" in s or "verify-full" in s for s in steps), "a URL the rewrite missed"
    text, skipped = script(steps, env["PATH"])
    assert skipped == []
    run = subprocess.run(["bash", "-c", text], cwd=cwd, env=env, capture_output=True, timeout=300, check=False)
    err = run.stderr.decode("utf-8", "replace")
    failed = re.search(r"step (\d+) exited (\d+)", err)
    assert run.returncode == 0, (steps[int(failed[1])] if failed else "before any step", err[-3000:])


def run_sql(block: str) -> None:
    """A ```sql block through psql as the superuser, stopping at the first error; `\\password` lines left out."""
    statements = "\n".join(line for line in block.splitlines() if not line.startswith("\\password"))
    run = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", PG_SERVER], input=statements.encode(),
                         capture_output=True, timeout=120, check=False)  # fmt: skip
    assert run.returncode == 0, (statements, run.stderr.decode("utf-8", "replace"))


def hivemem(env: dict[str, str], cwd: Path, *args: str) -> str:
    done = subprocess.run(["hivemem", *args], env={**env, "HIVEMEM_TOKEN": "@owner"}, cwd=cwd, capture_output=True,
                          timeout=120, check=True)  # fmt: skip
    return done.stdout.decode()


def tools_on_path() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing and os.environ.get("HIVEMEM_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"HIVEMEM_REQUIRE_POSTGRES=1 but {', '.join(missing)} not on PATH")
    if missing:
        pytest.skip(f"PostgreSQL's client tools are not on PATH: {', '.join(missing)}")


def drop(names: dict[str, str]) -> None:
    with pg_superuser() as conn:
        for database in (names["hivemem"], names["hivemem_restored"]):
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for role in (names["hivemem_admin"], names["hivemem_app"]):
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_item11_the_team_guide_runs_as_printed_on_a_postgresql_server(tmp_path: Path) -> None:
    pg_superuser().close()  # a server answers (or the test skips, or fails under HIVEMEM_REQUIRE_POSTGRES=1)
    tools_on_path()
    run = uuid.uuid4().hex[:8]
    names = {n: f"{n.replace('hivemem', 'hm')}_{run}" for n in ("hivemem_admin", "hivemem_app", "hivemem")}
    names["hivemem_restored"] = f"hm_restored_{run}"
    blocks = [(language, on_test_server(text, names)) for language, text in guide_blocks()]
    assert [language for language, _ in blocks].count("sql") == 2 and len(blocks) >= 9, blocks
    (admin, admin_dir), (other, other_dir) = machine(tmp_path, "admin"), machine(tmp_path, "laptop")
    try:
        hivemem(other, other_dir, "memory", "add", "--space", "team/platform", "--content", "releases are tagged first")
        for language, text in blocks:
            if language == "sql":
                run_sql(text)
            elif SECOND_MACHINE in text:  # with the team's owner key, as an administrator gives it (step 5)
                shutil.copy(Path(admin["HOME"]) / ".config" / "hivemem" / "owner.key", other_dir / "owner.key")
                run_sh(text, other, other_dir)
            else:
                run_sh(text, admin, admin_dir)
        dumps = list(admin_dir.glob("hivemem-*.dump"))
        assert len(dumps) == 1, dumps
        restored = urlunsplit(urlsplit(PG_SERVER)._replace(path="/" + names["hivemem_restored"]))
        with psycopg.connect(restored, autocommit=True) as conn:  # the dump, taken as the admin role, restored
            owners = conn.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'hivemem'").fetchall()
            assert owners == [(names["hivemem_admin"],)]
            assert conn.execute("SELECT count(*) FROM hivemem.memories").fetchall() == [(0,)]
        back = hivemem(admin, admin_dir, "memory", "list", "--spaces", "team/platform", "--json")
        assert "releases are tagged first" in back, "the laptop's memory went into the team store and back out"
        assert hivemem(admin, admin_dir, "config", "get", "--key", "store.url").split() == ["key", "store.url", "value"]
    finally:
        for env, cwd in ((admin, admin_dir), (other, other_dir)):
            subprocess.run(["hivemem", "stop"], env={**env, "HIVEMEM_TOKEN": "@owner"}, cwd=cwd, capture_output=True,
                           timeout=60, check=False)  # fmt: skip
        drop(names)


# The walkthrough of a fresh laptop joining a team store ("From a fresh laptop to a first shared memory") is a pasted
# transcript: ```text blocks whose lines starting with "$ " are commands, the lines after each what it printed. It is
# replayed here on a fresh team store made as the walkthrough says (two client tokens, in its order) and compared
# line by line, after one rewrite each way (docs/decisions.md D403): the walkthrough's team.url names this run's
# database, its cut tokens are the tokens made here, and in what the commands print the home directory is `~` and
# the figures that change from run to run (milliseconds, timestamps) are masked on both sides.
WALKTHROUGH = "### From a fresh laptop to a first shared memory"
TRANSCRIPT = re.compile(r"^```text\n(\$ .*?)^```", re.S | re.M)
WALK_URL = "postgresql://127.0.0.1:5432/hivemem"
CUT_TOKEN = re.compile(r"hm1\.(g\d+)\.…")
GRANTS = '[{"right":"read","scope":"*"},{"right":"write","scope":"space:team/*"}]'
VARIES = ((re.compile(r"\b\d+ ms\b"), "N ms"), (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"), "TIME"))


def transcripts() -> list[list[tuple[str, list[str]]]]:
    """The walkthrough's transcripts, each a list of (command, the lines it printed)."""
    text = (Path(ROOT) / GUIDE).read_text(encoding="utf-8")
    found = []
    for block in TRANSCRIPT.findall(text[text.index(WALKTHROUGH) :]):
        steps: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        found.append(steps)
    return found


def masked(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        for pattern, mask in VARIES:
            line = pattern.sub(mask, line)
        out.append(line.rstrip())
    return out


def replay(steps: list[tuple[str, list[str]]], env: dict[str, str], cwd: Path, url: str,
           tokens: dict[str, str]) -> list[tuple[str, list[str]]]:  # fmt: skip
    """Each command run in one shell, in order, on this run's store: (command, what it printed, rewritten back)."""
    mark = f"--- step {uuid.uuid4().hex} ---"
    lines = []
    for command, _ in steps:
        command = CUT_TOKEN.sub(lambda m: tokens[m[1]], command.replace(WALK_URL, url))
        lines += [f"echo {shlex.quote(mark)}", f"{{ {command}\n}} 2>&1 </dev/null"]
    run = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=cwd, env=env, capture_output=True, timeout=300,
                         check=False)  # fmt: skip
    printed = run.stdout.decode().replace(url, WALK_URL).replace(env["HOME"], "~")
    parts = printed.split(mark + "\n")[1:]
    assert len(parts) == len(steps), (printed, run.stderr.decode())
    return [(command, part.splitlines()) for (command, _), part in zip(steps, parts, strict=True)]


def test_the_walkthrough_of_a_fresh_laptop_replays_as_pasted(tmp_path: Path) -> None:
    pg_superuser().close()  # a server answers (or the test skips, or fails under HIVEMEM_REQUIRE_POSTGRES=1)
    walked = transcripts()
    assert len(walked) == 2 and all(walked), walked
    (admin, admin_dir), machines = machine(tmp_path, "admin"), [machine(tmp_path, n) for n in ("ana", "ben")]
    with pg_database() as url:
        try:
            hivemem(admin, admin_dir, "config", "set", "--key", "store.url", "--value", url)
            hivemem(admin, admin_dir, "store", "init")
            tokens = {}
            for name in ("ana", "ben"):  # the walkthrough's two tokens, made in its order
                made = json.loads(hivemem(admin, admin_dir, "client", "add", "--name", f"{name}-laptop", "--grants",
                                          GRANTS, "--json"))  # fmt: skip
                tokens[made["principal"]] = made["token"]
            hivemem(admin, admin_dir, "stop")
            for steps, (env, cwd) in zip(walked, machines, strict=True):
                for (command, expected), (_, printed) in zip(steps, replay(steps, env, cwd, url, tokens), strict=True):
                    assert masked(printed) == masked(expected), command
        finally:
            for env, cwd in (admin, admin_dir), *machines:
                subprocess.run(["hivemem", "stop"], env={**env, "HIVEMEM_TOKEN": "@owner"}, cwd=cwd,
                               capture_output=True, timeout=60, check=False)  # fmt: skip
