"""`hivemem import --from KIND`: bring in the memories Claude Code, Codex, the MCP memory server or a notes folder
already keep, as drafts (default) or active memories, through `store.import`."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

from hivemem.cli import harvest, output
from hivemem.cli.parser import Parser
from hivemem.errors import HivememError

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any

    from hivemem.client import Progress

SUMMARY = "Import the memories another tool keeps (drafts unless --active); --dry-run previews them."


def run(args: list[str]) -> int:
    parser = Parser(prog="hivemem import", description=SUMMARY)
    parser.add_argument("--from", dest="kind", required=True, choices=harvest.KINDS, help="Which tool's files.")
    parser.add_argument("--path", action="append", help="A file or folder (repeatable); default: the tool's own.")
    parser.add_argument("--space", required=True, help="Space to import into, or @project / @user.")
    parser.add_argument("--active", action="store_true", help="Import as active memories instead of drafts.")
    parser.add_argument("--dry-run", action="store_true", help="List what would be imported; write nothing.")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    json_mode = "--json" in args
    try:
        ns = parser.parse_args(args)
        with output.Working("hivemem import", not ns.json) as working:
            result = harvest_into(ns.kind, ns.path, ns.space, ns.active, ns.dry_run, working.progress)
    except HivememError as exc:
        return output.error(exc, json_mode)
    return output.result("import", result, json_mode)


def harvest_into(kind: str, named: list[str] | None, space: str, active: bool, dry_run: bool,
                 progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    from hivemem.spaces import placeholder

    cwd, home = os.getcwd(), os.path.expanduser("~")
    space = placeholder(space)
    sources = [harvest.given(os.path.abspath(p)) for p in named] if named else harvest.default_paths(kind, cwd, home)
    skipped: list[dict[str, str]] = []
    items = harvest.read_items(kind, sources, skipped)
    doc = harvest.document(kind, items, space, "active" if active else "draft", cwd, home)
    result = _import(doc, dry_run, items, progress)
    shown = [{"path": harvest.relative(i.path, cwd, home), "line": i.line, "kind": i.kind,
              **({"title": i.title} if i.title else {}), "content": i.content[:120]} for i in items]  # fmt: skip
    out = {**result, "files": len({i.path for i in items}), "items": shown if dry_run else len(items)}
    return out | ({"skipped": [{**s, "path": harvest.relative(s["path"], cwd, home)} for s in skipped]}
                  if skipped else {})  # fmt: skip


def _import(doc: dict[str, object], dry_run: bool, items: list[harvest.Item],
            progress: Progress | None) -> dict[str, Any]:  # fmt: skip
    """store.import of the document from a private temporary file the daemon reads and the CLI then removes."""
    from hivemem.cli.verbs import call

    fd, path = tempfile.mkstemp(prefix="hivemem-import-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        return call("store.import", {"path": path, "dry_run": dry_run}, progress)
    except HivememError as exc:
        _name_the_file(exc, items)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _name_the_file(exc: HivememError, items: list[harvest.Item]) -> None:
    """A refusal points into the generated document; add the file and line it came from."""
    at = str(exc.data.get("at", ""))
    parts = at.split("/")
    if len(parts) > 2 and parts[1] == "memories" and parts[2].isdigit() and int(parts[2]) < len(items):
        item = items[int(parts[2])]
        exc.data.update(file=item.path, line=item.line)
        exc.message += f" ({item.path}, line {item.line})"
