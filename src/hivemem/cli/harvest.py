"""Memories other tools already keep, read into an export document that `store.import` then applies.

Sources (docs/decisions.md D104): Claude Code's CLAUDE.md files and auto memory, Codex's AGENTS.md files and
memories, the MCP reference memory server's JSONL knowledge graph, and a folder of Markdown notes with front
matter. Each item remembers its file and line; content decides duplicates, so a second run adds nothing.
"""

from __future__ import annotations

import glob
import json
import os
import re

from hivemem.errors import InvalidParams

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any

KINDS = ("claude-code", "codex", "mcp-memory", "markdown")
TAG_BAD = re.compile(r"[^a-z0-9-]+")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(.*)$")
MEMORY_KINDS = ("note", "fact", "decision", "procedure", "preference", "convention", "task", "lesson")


class Item:
    """One memory to be: its text and where it was read."""

    __slots__ = ("content", "kind", "line", "path", "tags", "title")

    def __init__(self, content: str, path: str, line: int, *, title: str = "", kind: str = "note",
                 tags: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.content, self.path, self.line, self.title, self.kind, self.tags = content, path, line, title, kind, tags


def default_paths(kind: str, cwd: str, home: str) -> list[str]:
    """Where a harness keeps memories when no --path is given (those that exist)."""
    from hivemem.paths import harness_home

    if kind == "claude-code":
        own = harness_home(kind)
        project = re.sub(r"[^A-Za-z0-9]", "-", cwd)  # Claude Code names a project's folder after its path
        found = [os.path.join(own, "CLAUDE.md"), os.path.join(cwd, "CLAUDE.md"),
                 os.path.join(cwd, ".claude", "CLAUDE.md"), os.path.join(cwd, "CLAUDE.local.md")]  # fmt: skip
        found += sorted(glob.glob(os.path.join(own, "projects", project, "memory", "*.md")))
    elif kind == "codex":
        own = harness_home(kind)
        found = [os.path.join(own, "AGENTS.md"), os.path.join(own, "AGENTS.override.md"),
                 os.path.join(cwd, "AGENTS.md"), os.path.join(cwd, "AGENTS.override.md")]  # fmt: skip
        found += sorted(glob.glob(os.path.join(own, "memories", "**", "*.md"), recursive=True))
    else:
        raise InvalidParams("missing", f"--from {kind} needs --path", param="path")
    return [p for p in found if os.path.isfile(p)]


def read_items(kind: str, paths: list[str]) -> list[Item]:
    """Every item of every file (a directory: its Markdown files, recursively)."""
    items: list[Item] = []
    for path in paths:
        for file in _files(path, kind):
            items += _read(kind, file)
    return items


def _files(path: str, kind: str) -> list[str]:
    if not os.path.exists(path):
        raise InvalidParams("path", f"{path} does not exist", param="path", path=path)
    if os.path.isdir(path):
        pattern = "*.jsonl" if kind == "mcp-memory" else "*.md"
        return sorted(glob.glob(os.path.join(path, "**", pattern), recursive=True))
    return [path]


def _read(kind: str, file: str) -> list[Item]:
    with open(file, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if kind == "mcp-memory":
        return knowledge_graph(text, file)
    if kind == "markdown":
        return note(text, file)
    return instructions(text, file, "preference" if _user_level(file) else "convention")


def _user_level(file: str) -> bool:
    """A harness's own folder (~/.claude, ~/.codex) holds what is true of the person everywhere."""
    parts = os.path.normpath(file).split(os.sep)
    return (".claude" in parts[:-1] and "projects" not in parts) or ".codex" in parts[:-1]


def instructions(text: str, file: str, kind: str) -> list[Item]:
    """CLAUDE.md / AGENTS.md / MEMORY.md: each list item or paragraph one memory, titled by its heading.

    A blank line or a list item starts a new memory, except inside fenced code; headings are titles only.
    """
    items: list[Item] = []
    heading, start, fenced = "", 0, False
    block: list[str] = []
    lines = text.splitlines()

    def flush() -> None:
        body = "\n".join(block).strip()
        if body:
            items.append(Item(body, file, start, title=heading, kind=kind))
        block.clear()

    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            flush()
            heading = match.group(2)
            continue
        elif not fenced and (not line.strip() or ITEM.match(line)):
            flush()
            if not line.strip():
                continue
            line = ITEM.match(line).group(1)  # type: ignore[union-attr]
        if not block:
            start = number
        block.append(line)
    flush()
    return items


def knowledge_graph(text: str, file: str) -> list[Item]:
    """The MCP memory server's JSONL: an entity's observations and each relation become memories."""
    items: list[Item] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise InvalidParams("import", f"{file} line {number} is not JSON", param="path", path=file,
                                line=number) from None  # fmt: skip
        if not isinstance(record, dict):
            continue
        if record.get("type") == "entity":
            name, etype = str(record.get("name", "")), str(record.get("entityType", ""))
            for observation in record.get("observations") or []:
                items.append(Item(f"{name}: {observation}", file, number, title=name, kind="fact", tags=tags([etype])))
        elif record.get("type") == "relation":
            content = f"{record.get('from')} {record.get('relationType')} {record.get('to')}"
            items.append(Item(content, file, number, title=str(record.get("from", "")), kind="fact"))
    return items


def note(text: str, file: str) -> list[Item]:
    """A Markdown note (basic-memory, Obsidian): front matter for title, type and tags; the body is the memory."""
    meta, body, first = front_matter(text)
    if not body.strip():
        return []
    kind = str(meta.get("type", "")).lower()
    title = str(meta.get("title") or os.path.splitext(os.path.basename(file))[0])
    raw = meta.get("tags") or []
    return [Item(body.strip(), file, first, title=title, kind=kind if kind in MEMORY_KINDS else "note",
                 tags=tags(raw if isinstance(raw, list) else str(raw).split(",")))]  # fmt: skip


def front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """(front matter, body, first line of the body): `key: value`, `key: [a, b]` and `- item` lists."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    meta: dict[str, Any] = {}
    key = ""
    for number, line in enumerate(lines[1:], 2):
        if line.strip() in ("---", "..."):
            return meta, "\n".join(lines[number:]), number + 1
        if line.lstrip().startswith("- ") and key:
            meta.setdefault(key, [])
            if isinstance(meta[key], list):
                meta[key].append(line.lstrip()[2:].strip().strip("'\""))
        elif ":" in line:
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if value.startswith("[") and value.endswith("]"):
                meta[key] = [v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip()]
            elif value:
                meta[key] = value.strip("'\"")
    return {}, text, 1  # no closing line: not front matter


def tags(raw: list[Any]) -> tuple[str, ...]:
    """Tags in hivemem's grammar: lowercased, other characters as `-`, at most 16, unique."""
    out: list[str] = []
    for value in raw:
        tag = TAG_BAD.sub("-", str(value).lower().lstrip("#")).strip("-")[:64]
        if tag and tag not in out:
            out.append(tag)
    return tuple(out[:16])


def document(kind: str, items: list[Item], space: str, status: str, cwd: str, home: str) -> dict[str, Any]:
    """The export document (SPEC 12.1) of the items, as drafts or active memories in `space`."""
    memories = []
    for n, item in enumerate(items, 1):
        memory: dict[str, Any] = {
            "id": f"m{n}", "space": space, "kind": item.kind, "content": item.content, "tags": list(item.tags),
            "status": status, "source": f"{kind}:{os.path.basename(item.path)}"[:128],
            "provenance": {"kind": "file", "host": kind, "path": relative(item.path, cwd, home), "line": item.line},
            "author": {"principal": kind, "label": kind},
        }  # fmt: skip
        if status == "draft":
            memory["confidence"] = 0.7
        if item.title:
            memory["title"] = item.title.encode("utf-8")[:200].decode("utf-8", "ignore")
        memories.append(memory)
    return {"format": "hivemem.export", "version": 1, "store_id": kind, "memories": memories}


def relative(path: str, cwd: str, home: str) -> str:
    """The file as a relative path (provenance refuses absolute ones): under the working directory, else the
    home directory, else its name."""
    path = os.path.abspath(path)
    for base in (cwd, home):
        if path.startswith(base.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, base)[:512]
    return os.path.basename(path)
