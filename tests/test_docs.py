"""Docs that cannot drift: README commands, generated references, documented error codes."""

from __future__ import annotations

import re
from pathlib import Path

from hivemem.cli import reference
from hivemem.config import SETTINGS
from hivemem.manifest import VERBS

ROOT = Path(__file__).resolve().parent.parent
RAISE = re.compile(r"\b(InvalidParams|NotFound|Denied|Conflict|Unavailable|Unsupported|Failed)\(\s*\"([a-z_]+)\"")
PREFIX = {"InvalidParams": "invalid_params", "NotFound": "not_found", "Denied": "denied", "Conflict": "conflict",
          "Unavailable": "unavailable", "Unsupported": "unsupported", "Failed": "failed"}  # fmt: skip


def readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)


def steps(script: str) -> list[str]:
    """The commands of a shell script or one-liner: one per line or `&&` part, comments left out."""
    lines = [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [part.strip() for line in lines for part in line.split("&&")]


def test_readme_opens_with_two_commands_and_ci_runs_the_second() -> None:
    text = (ROOT / "README.md").read_text()
    first_block = text.index("```sh")
    assert text[:first_block].strip() == "# hivemem"
    run_it, test_it = readme_commands()[:2]
    assert "\n" not in run_it and "\n" not in test_it
    assert "hivemem memory add" in run_it and "hivemem memory search" in run_it
    assert "pytest" in test_it
    ci = steps((ROOT / ".ci" / "run").read_text())
    wanted = steps(test_it)
    assert [step for step in ci if step in wanted] == wanted, "CI runs each step of the README's command, in order"
    assert ci[-1] == wanted[-1], "the tests come last"
    assert sum(step.startswith("python3 -m venv") for step in ci) == 1, "CI builds the venv once"


def test_generated_references_are_fresh() -> None:
    for name, render in reference.GENERATED.items():
        assert (ROOT / "docs" / name).read_text() == render(), (
            f"docs/{name} is stale: python -m hivemem.cli.reference docs"
        )


def test_generated_plugins_and_marketplaces_are_fresh() -> None:
    from hivemem.cli import plugin

    for name, text in plugin.files().items():
        path = ROOT / name
        assert path.is_file() and path.read_text() == text, f"{name} is stale: python -m hivemem.cli.reference docs"


def test_every_verb_and_setting_is_documented() -> None:
    verbs = (ROOT / "docs" / "verbs.md").read_text()
    for verb in VERBS:
        assert f"## `{verb.name}`" in verbs
        for param in verb.params:
            assert f"| `{param.name}` |" in verbs
    for setting in SETTINGS:
        assert f"| `{setting.key}` |" in verbs


def test_every_raised_error_code_is_documented() -> None:
    documented = {code for code, _ in reference.ERROR_CODES}
    raised = set()
    for path in (ROOT / "src" / "hivemem").rglob("*.py"):
        for cls, detail in RAISE.findall(path.read_text()):
            raised.add(f"{PREFIX[cls]}.{detail}")
    assert raised, "the scan found no raise sites"
    assert raised <= documented, f"undocumented error codes: {sorted(raised - documented)}"


def test_decisions_are_written_down() -> None:
    text = (ROOT / "docs" / "decisions.md").read_text()
    assert len(re.findall(r"^## D\d+\.", text, re.M)) >= 10
