"""Every ```sh example of the docs runs as printed: in order, in one shell, in a fresh HOME with this hivemem on
PATH, and each exits 0. The operations guide and the hooks guide run together, from a project directory holding the
files the import examples read (a CLAUDE.md, an AGENTS.md, an MCP memory file and a folder of notes, as a reader
would have them); every other guide runs alone, in its own fresh HOME, with the pinned harness CLIs (claude, codex)
on PATH where it names them. README.md and the quick start are run the same way, from a fresh install, by
test_docs_run.py; the team guide, on a PostgreSQL server, by test_docs_team.py.

A block that cannot run in a fresh home says so on its first line, `# not run by the docs test: <reason>`
(docs/decisions.md D325); EXEMPT lists those blocks, so a new one is a visible change here, and a block with
no such line that fails fails this test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import node_client
from hivemem.manifest import NOT_RUN
from test_docs_run import ROOT, commands, fresh_env, script, sh_blocks
from test_docs_team import GUIDE as TEAM_GUIDE

DOCS = ("docs/operations.md", "docs/hooks.md")


def reader_files(home: Path, project: Path) -> None:
    """What the import examples read: files a person already has."""
    (project / "CLAUDE.md").write_text("# Build\n\n- run `make check` before every push\n")
    (project / "AGENTS.md").write_text("- keep pull requests under 300 lines\n")
    lines = [{"type": "entity", "name": "Ada", "entityType": "person", "observations": ["prefers tea"]},
             {"type": "relation", "from": "Ada", "to": "hivemem", "relationType": "maintains"}]  # fmt: skip
    (home / "memory.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (home / "notes").mkdir()
    (home / "notes" / "release.md").write_text("---\ntitle: Releases\ntype: procedure\n---\nTag, then deploy.\n")


def test_item11_the_operations_and_hooks_examples_run_as_printed(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "home" / "project"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    reader_files(home, project)
    env = fresh_env(str(home))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # this hivemem, as installed
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")  # a login session's own runtime directory
    os.mkdir(env["XDG_RUNTIME_DIR"], 0o700)
    steps = [c for name in DOCS for block in sh_blocks(name) for c in commands(block)]
    assert len(steps) >= 18 and any(s.startswith("hivemem import --from mcp-memory") for s in steps), steps
    text, skipped = script(steps, env["PATH"])
    assert skipped == []
    try:
        run = subprocess.run(["bash", "-c", text], cwd=project, env=env, capture_output=True, timeout=600,
                             check=False)  # fmt: skip
        err = run.stderr.decode("utf-8", "replace")
        failed = re.search(r"step (\d+) exited (\d+)", err)
        assert run.returncode == 0, (steps[int(failed[1])] if failed else "before any step", err[-3000:])
        owner = {**env, "HIVEMEM_TOKEN": "@owner"}
        listed = subprocess.run(["hivemem", "memory", "list", "--status", "draft", "--json"], env=owner, cwd=project,
                                capture_output=True, check=True).stdout.decode()  # fmt: skip
        assert "make check" in listed and "prefers tea" in listed, "the imports wrote what the files hold"
        notes = subprocess.run(["hivemem", "memory", "list", "--spaces", "team/notes", "--status", "draft", "--json"],
                               env=owner, cwd=project, capture_output=True, check=True).stdout.decode()  # fmt: skip
        assert "Tag, then deploy." in notes
    finally:
        subprocess.run(["hivemem", "stop"], env={**env, "HIVEMEM_TOKEN": "@owner"}, cwd=project,
                       capture_output=True, timeout=60, check=False)  # fmt: skip


MARK = NOT_RUN
# Each guide that runs alone, and the harness CLIs it names. The plugin guide runs in the repository, as it says.
ALONE = {"docs/verbs.md": (), "docs/mcp.md": ("claude", "codex"), "docs/embeddings.md": (), "docs/security.md": (),
         "docs/plugins.md": ("claude", "codex")}  # fmt: skip
INSTALLS = "it installs from the package index (the test's environment has the extra)"
FOLLOWS = "it follows new events until interrupted"
# The blocks marked as not run, per file, by reason: a new one changes this list.
EXEMPT = {
    "docs/verbs.md": [FOLLOWS],
    "docs/embeddings.md": [INSTALLS],
    "docs/security.md": ["it clones gitleaks over the network"],
    "docs/team.md": [INSTALLS, FOLLOWS, "the token is one an administrator of a team store gave you",
                     "it needs a team store mounted"],
}  # fmt: skip
SHELL_FENCE = re.compile(r"^ *```(bash|shell|console|zsh|shell-session)\b", re.M)


def runnable(name: str) -> tuple[list[str], list[str]]:
    """A file's ```sh blocks that run, and the reasons of those marked as not run."""
    blocks = sh_blocks(name)
    return [b for b in blocks if not b.startswith(MARK)], [b.splitlines()[0].removeprefix(MARK) for b in blocks
                                                           if b.startswith(MARK)]  # fmt: skip


def test_item11_every_doc_with_shell_examples_is_run_and_its_exemptions_are_listed() -> None:
    root = Path(__file__).resolve().parent.parent
    names = ["README.md", *sorted(str(p.relative_to(root)) for p in (root / "docs").rglob("*.md"))]
    with_blocks = {n for n in names if sh_blocks(n)}
    run_elsewhere = {"README.md", "docs/quickstart.md", TEAM_GUIDE}  # test_docs_run.py, test_docs_team.py
    assert with_blocks == {*run_elsewhere, *DOCS, *ALONE}, "a new guide with examples: run it here"
    for name in names:
        text = (root / name).read_text(encoding="utf-8")
        assert not SHELL_FENCE.search(text), f"{name}: shell examples are ```sh blocks, which this test runs"
        marked = runnable(name)[1]
        assert marked == EXEMPT.get(name, []), (name, marked)
        assert all(MARK not in c for b in runnable(name)[0] for c in commands(b)), f"{name}: the mark goes first"


@pytest.mark.parametrize("name", sorted(ALONE))
def test_item11_each_guide_runs_as_printed_in_a_fresh_home(tmp_path: Path, name: str) -> None:
    home, project = tmp_path / "home", tmp_path / "home" / "project"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    env = {
        k: v for k, v in fresh_env(str(home)).items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "CODEX"))
    }
    clients = [os.path.dirname(node_client(c)) for c in ALONE[name]]  # the pinned ones, as tests/clients has them
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), *dict.fromkeys(clients), env["PATH"]])
    env.update(
        XDG_RUNTIME_DIR=str(tmp_path / "run"), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1"
    )
    os.mkdir(env["XDG_RUNTIME_DIR"], 0o700)
    blocks, marked = runnable(name)
    steps = [c for block in blocks for c in commands(block)]
    assert steps and len(marked) == len(EXEMPT.get(name, []))
    text, skipped = script(steps, env["PATH"])
    assert skipped == []
    cwd = ROOT if name == "docs/plugins.md" else str(project)  # "in a clone of this repository"
    try:
        run = subprocess.run(["bash", "-c", text], cwd=cwd, env=env, capture_output=True, timeout=300, check=False)
        err = run.stderr.decode("utf-8", "replace")
        failed = re.search(r"step (\d+) exited (\d+)", err)
        assert run.returncode == 0, (steps[int(failed[1])] if failed else "before any step", err[-3000:])
        owner = {**env, "HIVEMEM_TOKEN": "@owner"}
        if name == "docs/verbs.md":  # the ids the examples name are the ones they made: m2 moved, m1 purged
            moved = subprocess.run(["hivemem", "memory", "list", "--spaces", "team/platform", "--json"], env=owner,
                                   cwd=project, capture_output=True, check=True).stdout.decode()  # fmt: skip
            assert "deploys go out on Tuesdays" in moved, moved
            gone = subprocess.run(
                ["hivemem", "memory", "get", "--id", "m1"], env=owner, cwd=project, capture_output=True
            )
            assert gone.returncode != 0 and b"not_found.memory" in gone.stderr
        if name == "docs/mcp.md":  # the token the shell kept, not a placeholder, is what both harnesses start with
            registered = (home / ".claude.json").read_text() + (home / ".codex" / "config.toml").read_text()
            assert "<token>" not in registered and registered.count("hm1.") >= 2, registered
    finally:
        subprocess.run(["hivemem", "stop"], env={**env, "HIVEMEM_TOKEN": "@owner"}, cwd=project,
                       capture_output=True, timeout=60, check=False)  # fmt: skip
