"""`hivemem import --from KIND`: memories other tools keep, read from fixture files written in their formats."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from conftest import Home, fails


def put(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.fixture
def places(home: Home) -> tuple[str, str]:
    """(a fake home directory, a project directory inside it) for the harness files."""
    fake_home = os.path.join(home.base, "person")
    project = os.path.join(fake_home, "src", "api")
    os.makedirs(project)
    home.env["HOME"] = fake_home
    for moved in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):  # the harnesses' own homes, when set, win over HOME
        home.env.pop(moved, None)
    return fake_home, project


def memories(home: Home, space: str, status: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = home.ok("memory", "list", "--spaces", space, "--status", status, "--limit", "200")[
        "memories"
    ]
    return [home.ok("memory", "get", "--id", m["id"]) for m in found]


CLAUDE_USER = "# Preferences\n\n- Answer tersely.\n- Use British spelling.\n"
CLAUDE_PROJECT = (
    "# api\n\nBuild with `make`; tests with `make test`.\n\n## Conventions\n\n- Zig is pinned with .zigversion.\n"
)
AUTO_MEMORY = "# Memory index\n\n- The staging database is reset nightly.\n"


def test_claude_code_files_come_in_as_drafts_naming_file_and_line(home: Home, places: tuple[str, str]) -> None:
    fake_home, project = places
    put(os.path.join(fake_home, ".claude", "CLAUDE.md"), CLAUDE_USER)
    put(os.path.join(project, "CLAUDE.md"), CLAUDE_PROJECT)
    put(os.path.join(project, "CLAUDE.local.md"), "My sandbox is sandbox-7.\n")
    encoded = re.sub(r"[^A-Za-z0-9]", "-", project)
    put(os.path.join(fake_home, ".claude", "projects", encoded, "memory", "MEMORY.md"), AUTO_MEMORY)
    preview = home.ok("import", "--from", "claude-code", "--space", "@project", "--dry-run", cwd=project)
    assert preview["planned"] == {"add": 6, "duplicate": 0, "skip": 0} and preview["applied"] is False
    assert {(i["path"], i["line"]) for i in preview["items"]} >= {(".claude/CLAUDE.md", 3), ("CLAUDE.md", 7)}
    assert home.ok("store", "status")["drafts"] == 0, "a preview writes nothing"
    result = home.ok("import", "--from", "claude-code", "--space", "@project", cwd=project)
    assert result["planned"]["add"] == 6 and result["applied"] is True
    drafts = memories(home, "project/api", "draft")
    assert len(drafts) == 6 and memories(home, "project/api", "active") == []
    terse = next(m for m in drafts if m["content"] == "Answer tersely.")
    assert terse["kind"] == "preference" and terse["title"] == "Preferences"
    assert terse["source"] == "claude-code:CLAUDE.md"
    assert {k: terse["provenance"][k] for k in ("kind", "host", "path", "line")} == {
        "kind": "import", "host": "claude-code", "path": ".claude/CLAUDE.md", "line": 3}  # fmt: skip
    zig = next(m for m in drafts if "Zig" in m["content"])
    assert (zig["kind"], zig["title"], zig["provenance"]["path"], zig["provenance"]["line"]) == (
        "convention", "Conventions", "CLAUDE.md", 7)  # fmt: skip
    assert any(m["provenance"]["path"].endswith("memory/MEMORY.md") for m in drafts)
    again = home.ok("import", "--from", "claude-code", "--space", "@project", cwd=project)
    assert again["planned"] == {"add": 0, "duplicate": 6, "skip": 0}, "a second run adds nothing"


def test_codex_files_come_in_as_active_memories_when_asked(home: Home, places: tuple[str, str]) -> None:
    fake_home, project = places
    put(os.path.join(fake_home, ".codex", "AGENTS.md"), "- Never force-push.\n")
    put(os.path.join(project, "AGENTS.md"), "# Testing\n\nRun pytest with -x.\n")
    put(os.path.join(fake_home, ".codex", "memories", "notes.md"), "The API rate limit is 100 requests a minute.\n")
    result = home.ok("import", "--from", "codex", "--space", "project/api", "--active", cwd=project)
    assert result["planned"] == {"add": 3, "duplicate": 0, "skip": 0}
    active = memories(home, "project/api", "active")
    assert {m["content"] for m in active} == {"Never force-push.", "Run pytest with -x.",
                                              "The API rate limit is 100 requests a minute."}  # fmt: skip
    assert {m["source"] for m in active} == {"codex:AGENTS.md", "codex:notes.md"}
    assert {m["provenance"]["path"] for m in active} == {".codex/AGENTS.md", "AGENTS.md", ".codex/memories/notes.md"}


def test_codex_home_moves_where_codex_memories_are_read(home: Home, places: tuple[str, str]) -> None:
    _, project = places
    elsewhere = os.path.join(home.base, "codex-home")
    put(os.path.join(elsewhere, "memories", "MEMORY.md"), "# Task group\n\n- The deploy job needs VPN access.\n")
    home.env["CODEX_HOME"] = elsewhere
    result = home.ok("import", "--from", "codex", "--space", "project/api", "--dry-run", cwd=project)
    assert [i["content"] for i in result["items"]] == ["The deploy job needs VPN access."]


def test_the_mcp_memory_servers_knowledge_graph(home: Home) -> None:
    lines = [
        {"type": "entity", "name": "John_Smith", "entityType": "person",
         "observations": ["Speaks fluent Spanish", "Prefers morning meetings"]},
        {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
        {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    ]  # fmt: skip
    path = put(os.path.join(home.base, "memory.jsonl"), "\n".join(json.dumps(x) for x in lines) + "\n")
    result = home.ok("import", "--from", "mcp-memory", "--path", path, "--space", "user")
    assert result["planned"] == {"add": 3, "duplicate": 0, "skip": 0}
    drafts = {m["content"]: m for m in memories(home, "user", "draft")}
    assert set(drafts) == {"John_Smith: Speaks fluent Spanish", "John_Smith: Prefers morning meetings",
                           "John_Smith works_at Anthropic"}  # fmt: skip
    spanish = drafts["John_Smith: Speaks fluent Spanish"]
    assert spanish["tags"] == ["person"] and spanish["kind"] == "fact" and spanish["provenance"]["line"] == 1
    assert drafts["John_Smith works_at Anthropic"]["provenance"]["line"] == 3
    bad = put(os.path.join(home.base, "broken.jsonl"), '{"type": "entity"\n')
    error = fails(home, "import", "--from", "mcp-memory", "--path", bad, "--space", "user",
                  code="invalid_params.import", exit_code=2)  # fmt: skip
    assert error["data"]["line"] == 1


def test_a_folder_of_markdown_notes_with_front_matter(home: Home) -> None:
    notes = os.path.join(home.base, "vault")
    front = "---\ntitle: How we deploy\ntype: procedure\ntags:\n  - Ops\n  - deploy\n---\n"
    put(os.path.join(notes, "deploy.md"), front + "Tag a release, then run the deploy workflow.\n")
    put(os.path.join(notes, "people", "ana.md"), "---\ntags: [team, people]\n---\nAna owns the billing service.\n")
    put(os.path.join(notes, "plain.md"), "No front matter here.\n")
    put(os.path.join(notes, "empty.md"), "---\ntitle: nothing\n---\n\n")
    result = home.ok("import", "--from", "markdown", "--path", notes, "--space", "team/notes", "--active")
    assert result["planned"] == {"add": 3, "duplicate": 0, "skip": 0} and result["files"] == 3
    active = {m["title"]: m for m in memories(home, "team/notes", "active")}
    assert set(active) == {"How we deploy", "ana", "plain"}
    deploy = active["How we deploy"]
    assert (deploy["kind"], deploy["tags"], deploy["provenance"]["line"]) == ("procedure", ["ops", "deploy"], 8)
    assert active["ana"]["tags"] == ["team", "people"] and active["ana"]["provenance"]["path"].endswith("ana.md")


def test_a_secret_in_a_file_refuses_the_import_and_names_the_file(home: Home, places: tuple[str, str]) -> None:
    _, project = places
    agents = put(
        os.path.join(project, "AGENTS.md"), "- fine line\n- deploy key AKIA" + "IOSFODNN7EXAMPLF for staging\n"
    )
    error = fails(home, "import", "--from", "codex", "--path", agents, "--space", "project/api",
                  code="invalid_params.secret_content", exit_code=2)  # fmt: skip
    assert error["data"]["file"].endswith("AGENTS.md") and error["data"]["line"] == 2
    assert "AKIA" not in json.dumps(error)
    assert home.ok("store", "status")["drafts"] == 0, "nothing imported"
    fails(home, "import", "--from", "markdown", "--space", "user", code="invalid_params.missing", exit_code=2)


def test_front_matter_is_yaml(home: Home) -> None:
    """Read by PyYAML's safe loader (docs/decisions.md D347): quoting, block scalars and comments as YAML means them."""
    notes = os.path.join(home.base, "vault")
    put(os.path.join(notes, "a.md"), "---\ntitle: 'Deploy: the # steps'  # a comment\ntype: Decision\n"
        "tags: [\"a, b\", c]\n---\nWe deploy on Tuesdays.\n")  # fmt: skip
    put(os.path.join(notes, "b.md"), "---\ntitle: >\n  Folded\n  title\ntags: ops, infra\n...\nBody b.\n")
    put(os.path.join(notes, "c.md"), "---\n---\nNo keys at all.\n")
    home.ok("import", "--from", "markdown", "--path", notes, "--space", "user", "--active")
    found = {m["title"]: m for m in memories(home, "user", "active")}
    assert set(found) == {"Deploy: the # steps", "Folded title", "c"}
    assert (found["Deploy: the # steps"]["kind"], found["Deploy: the # steps"]["tags"]) == ("decision", ["a-b", "c"])
    assert found["Folded title"]["tags"] == ["ops", "infra"]


@pytest.mark.parametrize(
    ("front", "line", "why"),
    [
        ("title: [unclosed\ntype: note\n", 3, "not YAML"),
        ("- a list\n- not a mapping\n", 2, "not a mapping"),
        ("title: x\nrun: !!python/object/apply:os.system ['touch {marker}']\n", 3, "not YAML"),
        ("title: x\nbig: '" + "y" * (64 << 10) + "'\n", 2, "longer than 65536 bytes"),
    ],
)
def test_front_matter_that_is_not_a_yaml_mapping_is_refused_with_its_line(home: Home, front: str, line: int,
                                                                          why: str) -> None:  # fmt: skip
    marker = os.path.join(home.base, "ran")
    note = put(os.path.join(home.base, "vault", "bad.md"), "---\n" + front.format(marker=marker) + "---\nBody.\n")
    error = fails(home, "import", "--from", "markdown", "--path", os.path.dirname(note), "--space", "user",
                  code="invalid_params.import", exit_code=2)  # fmt: skip
    assert error["data"]["path"] == note and error["data"]["line"] == line, error
    assert why in error["message"], error
    assert not os.path.exists(marker)  # no tag builds an object, let alone runs one
    assert home.ok("store", "status")["memories"] == 0
