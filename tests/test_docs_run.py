"""The README and the quick start work as printed: their commands run in order, in one shell, in a fresh
HOME, on a fresh copy of the repository, with the pinned claude and codex on PATH, and every one of them exits 0.

This installs hivemem into a new virtual environment, so it takes as long as a `pip install` (about a
minute); the README's own test command, which would run this suite again, is the one block left out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from conftest import node_client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Harness CLIs are not part of hivemem: the tests run the pinned ones (tests/clients); `script` skips them elsewhere.
HARNESS_CLIS = ("claude", "codex")
BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.S | re.M)


def sh_blocks(name: str) -> list[str]:
    """The ```sh blocks of a markdown file, in order, with a list item's indentation removed."""
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        text = f.read()
    return ["\n".join(line.removeprefix(m[1]) for line in m[2].splitlines()) for m in BLOCK.finditer(text)]


def commands(block: str) -> list[str]:
    """One entry per command (a line and its backslash continuations, which bash joins), comments dropped."""
    out: list[str] = []
    pending = ""
    for line in block.splitlines():
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        if pending.strip() and not pending.lstrip().startswith("#"):
            out.append(pending.rstrip("\n"))
        pending = ""
    return out


def documented_commands() -> list[str]:
    """The README's commands (but its test command), then the quick start's, in the order a reader runs them."""
    readme = sh_blocks("README.md")
    assert "pytest" in readme[1]
    blocks = [readme[0], *readme[2:], *sh_blocks("docs/quickstart.md")]
    return [c for b in blocks for c in commands(b)]


def script(steps: list[str], path: str) -> tuple[str, list[str]]:
    """A bash script that runs each step in this shell (so `.` and variables carry on) and stops at the first
    that exits non-zero, naming it; harness CLIs missing from `path` are skipped and listed."""
    lines, skipped = ["set -o pipefail"], []
    for i, step in enumerate(steps):
        if step.split()[0] in HARNESS_CLIS and shutil.which(step.split()[0], path=path) is None:
            skipped.append(step)
            continue
        lines += [f"{{ {step}\n}}", f'rc=$?; if [ $rc -ne 0 ]; then echo "step {i} exited $rc" >&2; exit $rc; fi']
    return "\n".join(lines) + "\n", skipped


def fresh_path() -> str:
    """This PATH without any virtual environment's bin directory, as a new shell on this machine has it."""
    dirs = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if not os.path.exists(os.path.join(d, os.pardir, "pyvenv.cfg")))


def fresh_env(home: str) -> dict[str, str]:
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "HIVEMEM_")) and k not in dropped}
    # pip's cache only saves downloads; pointing it at the usual one keeps the install from fetching again.
    cache = os.environ.get("PIP_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "pip")
    return {**env, "HOME": home, "PATH": fresh_path(), "PIP_CACHE_DIR": cache}


@pytest.fixture
def clone() -> Iterator[str]:
    """A copy of the repository's files (tracked and new, not ignored) in a directory named hivemem, as a clone."""
    base = tempfile.mkdtemp(prefix="hm-docs-", dir="/tmp")
    repo = os.path.join(base, "hivemem")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if os.path.isfile(os.path.join(ROOT, name)):
            os.makedirs(os.path.dirname(os.path.join(repo, name)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), os.path.join(repo, name))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    os.makedirs(os.path.join(base, "home"))
    try:
        yield repo
    finally:
        hivemem = os.path.join(repo, ".venv", "bin", "hivemem")
        if os.path.exists(hivemem):  # the daemon the commands started, in that fresh HOME
            env = {**fresh_env(os.path.join(base, "home")), "HIVEMEM_TOKEN": "@owner"}
            subprocess.run([hivemem, "stop"], env=env, cwd=repo, capture_output=True, timeout=60, check=False)
        shutil.rmtree(base, ignore_errors=True)


def harness_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with the pinned harness CLIs (tests/clients) on PATH, none of a developer's own harness settings, and
    the harnesses' update checks and telemetry off."""
    clients = dict.fromkeys(os.path.dirname(node_client(c)) for c in HARNESS_CLIS)
    kept = {k: v for k, v in env.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "CODEX"))}
    path = os.pathsep.join([*clients, env["PATH"]])
    return {**kept, "PATH": path, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}


def test_readme_and_quickstart_run_as_printed(clone: str) -> None:
    steps = documented_commands()
    env = harness_env(fresh_env(os.path.join(os.path.dirname(clone), "home")))
    text, skipped = script(steps, env["PATH"])
    assert len(steps) > 30 and skipped == [], skipped
    run = subprocess.run(["bash", "-c", text], cwd=clone, env=env, capture_output=True, timeout=900, check=False)
    err = run.stderr.decode("utf-8", "replace")
    failed = re.search(r"step (\d+) exited (\d+)", err)
    assert run.returncode == 0, (steps[int(failed[1])] if failed else "before any step", err[-3000:])
    hivemem = os.path.join(clone, ".venv", "bin", "hivemem")
    kept = subprocess.run([hivemem, "memory", "list", "--spaces", "user,project/hivemem", "--json"], env=env,
                          cwd=clone, capture_output=True, check=True).stdout.decode()  # fmt: skip
    # The README's memories survive the quick start's purge, which erased only the memory it made itself.
    assert "hivemem keeps agent memories in SQLite" in kept and "We pin Zig 0.13 with .zigversion" in kept
    assert "Prefers PRs under 300 lines" not in kept
