"""Memories other tools already keep, read into an export document that `store.import` then applies.

Sources (docs/decisions.md D104): Claude Code's CLAUDE.md files and auto memory, Codex's AGENTS.md files and
memories, the MCP reference memory server's JSONL knowledge graph, and a folder of Markdown notes with front
matter. Each item remembers its file and line; content decides duplicates, so a second run adds nothing.

Files are read as a harness's files may be planted (docs/security.md): never through a symbolic link that leads
out of the folder given, only regular files (a FIFO, a device or a link loop is skipped), each at most
MAX_FILE_BYTES; what is skipped is reported with why.
"""

from __future__ import annotations

import json
import os
import re
import stat
import unicodedata

from hivemem.errors import InvalidParams
from hivemem.params import TAG_BYTES, valid_tag

KINDS = ("claude-code", "codex", "mcp-memory", "markdown")
TAG_BAD = re.compile(r"[\W_]+")  # what a tag cannot hold (params.valid_tag): a run of it becomes `-`
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(.*)$")
MEMORY_KINDS = ("note", "fact", "decision", "procedure", "preference", "convention", "task", "lesson")
MAX_FILE_BYTES = 16 << 20  # far above any CLAUDE.md, AGENTS.md, note or knowledge graph in use
MAX_FILES = 100_000
MAX_FRONT_MATTER_BYTES = 64 << 10  # a note's title, type and tags; far above any in use


class Item:
    """One memory to be: its text and where it was read."""

    __slots__ = ("content", "kind", "line", "path", "tags", "title")

    def __init__(self, content: str, path: str, line: int, *, title: str = "", kind: str = "note",
                 tags: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.content, self.path, self.line, self.title, self.kind, self.tags = content, path, line, title, kind, tags


Source = tuple[str, str]  # (a file or folder to read, the folder no link may lead out of)


def default_paths(kind: str, cwd: str, home: str) -> list[Source]:
    """Where a harness keeps memories when no --path is given (those that exist), each with its folder: the
    project's files stay in the project, the harness's own in its home."""
    from hivemem.paths import harness_home

    if kind == "claude-code":
        own = harness_home(kind)
        project = re.sub(r"[^A-Za-z0-9]", "-", cwd)  # Claude Code names a project's folder after its path
        found = [(os.path.join(own, "CLAUDE.md"), own), (os.path.join(cwd, "CLAUDE.md"), cwd),
                 (os.path.join(cwd, ".claude", "CLAUDE.md"), cwd), (os.path.join(cwd, "CLAUDE.local.md"), cwd),
                 (os.path.join(own, "projects", project, "memory"), own)]  # fmt: skip
    elif kind == "codex":
        own = harness_home(kind)
        found = [(os.path.join(own, "AGENTS.md"), own), (os.path.join(own, "AGENTS.override.md"), own),
                 (os.path.join(cwd, "AGENTS.md"), cwd), (os.path.join(cwd, "AGENTS.override.md"), cwd),
                 (os.path.join(own, "memories"), own)]  # fmt: skip
    else:
        raise InvalidParams("missing", f"--from {kind} needs --path", param="path")
    return [(p, root) for p, root in found if os.path.lexists(p)]


def given(path: str) -> Source:
    """A path named with --path, and its folder: itself if it is a folder, else the one that holds it."""
    if not os.path.lexists(path):
        raise InvalidParams("path", f"{path} does not exist", param="path", path=path)
    return path, path if os.path.isdir(path) and not os.path.islink(path) else os.path.dirname(path)


def read_items(kind: str, sources: list[Source], skipped: list[dict[str, str]] | None = None) -> list[Item]:
    """Every item of every file (a folder: its Markdown files, recursively, never through a link to a folder);
    each file skipped is added to `skipped` as {path, why}."""
    items: list[Item] = []
    skipped = [] if skipped is None else skipped
    for path, root in sources:
        for file in _files(path, kind):
            text, why = read_file(file, root)
            if text is None:
                skipped.append({"path": file, "why": why})
            else:
                items += _read(kind, file, text)
    return items


def _files(path: str, kind: str) -> list[str]:
    """A file given is itself; a folder, its `*.md` (`*.jsonl` for mcp-memory) files below it, found without
    entering a linked directory, so a link loop (`x -> .`) ends; at most MAX_FILES."""
    if os.path.islink(path) or not os.path.isdir(path):
        return [path]
    suffix = ".jsonl" if kind == "mcp-memory" else ".md"
    found: list[str] = []
    for folder, dirs, names in os.walk(path, followlinks=False):
        dirs.sort()
        found += [os.path.join(folder, n) for n in sorted(names) if n.endswith(suffix)]
        if len(found) >= MAX_FILES:
            break
    return found[:MAX_FILES]


def read_file(file: str, root: str) -> tuple[str | None, str]:
    """(text, "") of a regular file inside `root` once links are resolved, of at most MAX_FILE_BYTES; else
    (None, why). Opened without blocking, so a FIFO never holds the import."""
    real, inside = os.path.realpath(file), os.path.realpath(root)
    if os.path.commonpath([real, inside]) != inside:
        return None, f"a symbolic link to {real}, outside {root}"
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:  # a link loop (ELOOP), a file gone or unreadable
        return None, exc.strerror or "cannot be opened"
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before `fdopen`, which raises for a directory (`CLAUDE.md -> .`)
        os.close(fd)
        return None, "not a regular file"
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES} bytes"
    return data.decode("utf-8", errors="replace"), ""


def _read(kind: str, file: str, text: str) -> list[Item]:
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
            raise _bad_line(file, number, "is not JSON") from None
        except RecursionError:
            raise _bad_line(file, number, "is nested too deeply") from None
        if not isinstance(record, dict):
            continue
        if record.get("type") == "entity":
            name, etype = str(record.get("name", "")), str(record.get("entityType", ""))
            observations = record.get("observations") or []
            if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                raise _bad_line(file, number, "has observations that are not a list of strings")
            for observation in observations:
                items.append(Item(f"{name}: {observation}", file, number, title=name, kind="fact", tags=tags([etype])))
        elif record.get("type") == "relation":
            content = f"{record.get('from')} {record.get('relationType')} {record.get('to')}"
            items.append(Item(content, file, number, title=str(record.get("from", "")), kind="fact"))
    return items


def _bad_line(file: str, number: int, why: str) -> InvalidParams:
    return InvalidParams("import", f"{file} line {number} {why}", param="path", path=file, line=number)


def note(text: str, file: str) -> list[Item]:
    """A Markdown note (basic-memory, Obsidian): front matter for title, type and tags; the body is the memory."""
    meta, body, first = front_matter(text, file)
    if not body.strip():
        return []
    kind = _scalar(meta.get("type")).lower()
    title = " ".join(_scalar(meta.get("title")).split()) or os.path.splitext(os.path.basename(file))[0]
    raw = meta.get("tags") or []
    listed = [_scalar(v) for v in raw] if isinstance(raw, list) else _scalar(raw).split(",")
    return [Item(body.strip(), file, first, title=title, kind=kind if kind in MEMORY_KINDS else "note",
                 tags=tags(listed))]  # fmt: skip


def front_matter(text: str, file: str) -> tuple[dict[str, object], str, int]:
    """(front matter, body, first line of the body): the YAML mapping between a first line `---` and the next
    `---` or `...` line; with no closing line the whole text is the body."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    for number, line in enumerate(lines[1:], 2):
        if line.strip() in ("---", "..."):
            return _yaml_mapping("\n".join(lines[1 : number - 1]), file), "\n".join(lines[number:]), number + 1
    return {}, text, 1  # no closing line: not front matter


def _yaml_mapping(source: str, file: str) -> dict[str, object]:
    """Front matter read by PyYAML's safe loader (docs/decisions.md D347): no tag builds an object, at most
    MAX_FRONT_MATTER_BYTES are parsed, and what is not a mapping is an invalid_params.import naming the line."""
    import yaml

    if len(source.encode("utf-8")) > MAX_FRONT_MATTER_BYTES:
        raise _bad_line(file, 2, f"starts front matter longer than {MAX_FRONT_MATTER_BYTES} bytes")
    try:
        meta = yaml.load(source, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        why = getattr(exc, "problem", None) or "cannot be read"
        raise _bad_line(file, 2 + (mark.line if mark else 0), f"is in front matter that is not YAML: {why}") from None
    if meta is not None and not isinstance(meta, dict):
        raise _bad_line(file, 2, f"starts front matter that is a {type(meta).__name__}, not a mapping of keys")
    return meta or {}


def _scalar(value: object) -> str:
    """A front matter value as text when it is one string, number or date; "" for a list, mapping or null, which
    is never turned into text (an alias-built structure could be huge written out)."""
    return "" if value is None or isinstance(value, list | dict | bool) else str(value)


def tags(raw: list[str]) -> tuple[str, ...]:
    """Tags in hivemem's grammar (docs/decisions.md D280): NFC, lowercased, other characters as `-`, at most
    64 bytes, at most 16, unique; what still is no tag is left out."""
    out: list[str] = []
    for value in raw:
        text = unicodedata.normalize("NFC", str(value).lower().lstrip("#"))
        tag = TAG_BAD.sub("-", text).strip("-").encode("utf-8")[:TAG_BYTES].decode("utf-8", "ignore").strip("-")
        if tag and tag not in out and valid_tag(tag):
            out.append(tag)
    return tuple(out[:16])


def document(kind: str, items: list[Item], space: str, status: str, cwd: str, home: str) -> dict[str, object]:
    """The export document (docs/operations.md) of the items, as drafts or active memories in `space`."""
    memories = []
    for n, item in enumerate(items, 1):
        memory: dict[str, object] = {
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
