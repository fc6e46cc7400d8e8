"""Memory pages: search and list, a memory with its history, diffs and audit, and the owner's edits."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from hivemem.auth import KINDS
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import MODES, STATUSES
from hivemem.web import governance, html
from hivemem.web.app import PAGE, Owner, Request, Response, error_page, redirect

COLUMNS = ("id", "space", "kind", "title", "text", "tags", "status", "updated")


def search(owner: Owner, req: Request) -> Response:
    """Search with a query, or list newest first without one; filters for spaces, kinds, tags and status."""
    query, status, mode = req.arg("q").strip(), req.arg("status", "active"), req.arg("mode", "auto")
    filters = {
        "spaces": req.spaces(),
        "kinds": req.words("kinds") or None,
        "tags": req.words("tags") or None,
    }
    if query:
        found = owner.call("memory.search", query=query, mode=mode, limit=PAGE, **filters)
        rows = [m for m in found["results"] if m.get("status", "active") == status]
        fallback = f" (fell back from {found['fallback']})" if found.get("fallback") else ""
        summary = f"<p>Mode: <strong>{html.esc(found['mode'])}</strong>{html.esc(fallback)} · {len(rows)} results</p>"
        pager = ""
    else:
        deleted = req.arg("deleted") == "1"
        listed = owner.call(
            "memory.list",
            status=status,
            after=req.arg("after") or None,
            limit=PAGE,
            include_deleted=deleted or None,
            **filters,
        )
        rows, summary = listed["memories"], "<p>Mode: <strong>list</strong> (newest first)</p>"
        pager = _pager(req, listed.get("next"))
    return Response(body=html.page("Search", _filters(req) + summary + memory_table(rows) + pager, memories=True))


def _filters(req: Request) -> str:
    fields = (
        html.text_input("q", "Query", req.arg("q"), placeholder="words to look for")
        + html.text_input("spaces", "Spaces", req.arg("spaces"), placeholder="user, project/api")
        + html.select("kinds", "Kind", KINDS, req.arg("kinds"), blank="any")
        + html.text_input("tags", "Tags", req.arg("tags"), placeholder="all of these")
        + html.select("status", "Status", STATUSES, req.arg("status", "active"))
        + html.select("mode", "Mode", MODES, req.arg("mode", "auto"))
        + f'<label><input type="checkbox" name="deleted" value="1"{" checked" if req.arg("deleted") else ""}>'
        " deleted too (lists only)</label>"
    )
    return '<div class="filters">' + html.form("/search", "", fields, "Search", method="get") + "</div>"


def _pager(req: Request, next_id: str | None) -> str:
    if not next_id:
        return ""
    params = {k: v[0] for k, v in req.query.items() if v and k != "after"}
    return f'<p class="pager">{html.link("/search?" + urlencode({**params, "after": next_id}), "Older →")}</p>'


def memory_table(rows: list[dict[str, Any]]) -> str:
    return html.table(COLUMNS, (_row(m) for m in rows), empty="No memory matches.")


def _row(m: dict[str, Any]) -> list[str]:
    status = m.get("status", "active") + (" (deleted)" if m.get("deleted") else "")
    review = f' <span class="badge">{html.esc(m["review"])}</span>' if m.get("review") else ""
    return [
        html.link(f"/memory/{m['id']}", m["id"]),
        html.esc(m["space"]),
        html.esc(m["kind"]),
        html.esc(m.get("title", "")),
        html.esc(m.get("snippet", "")),
        html.esc(", ".join(m.get("tags", []))),
        html.esc(status) + review,
        html.esc(m.get("updated", "")),
    ]


def detail(owner: Owner, req: Request, mid: str) -> Response:
    """Everything about one memory: content, fields, provenance as claims, relations, versions, audit, actions."""
    m = owner.call("memory.get", id=mid, include_deleted=True)
    versions = owner.call("memory.history", id=mid)["versions"]
    parts = [
        html.dl(_fields(m)),
        "<h2>Content</h2>" + html.pre(m["content"]),
        "<h2>Provenance (claims by the writer, not verified)</h2>" + _provenance(m),
        "<h2>Relations</h2>" + _relations(m.get("relations", [])),
        "<h2>Versions</h2>" + _versions(mid, versions),
        _audit(owner, mid),
        "<h2>Actions</h2>" + actions(owner, req, m),
    ]
    return Response(body=html.page(f"Memory {mid}", "".join(parts), memories=True))


def _fields(m: dict[str, Any]) -> list[tuple[str, str]]:
    status = m["status"] + (f" (deleted {m['deleted']})" if m.get("deleted") else "")
    review = m.get("review", "")
    return [
        ("Title", html.esc(m.get("title", ""))),
        ("Space", html.esc(m["space"])),
        ("Kind", html.esc(m["kind"])),
        ("Tags", html.esc(", ".join(m.get("tags", [])))),
        ("Status", html.esc(status)),
        ("Revision", html.esc(m["revision"])),
        ("Author", html.who(m.get("author"))),
        ("Updated by", html.who(m.get("updated_by"))),
        ("Created", html.esc(m.get("created"))),
        ("Updated", html.esc(m.get("updated"))),
        ("Confidence", html.esc(m.get("confidence"))),
        ("Confidence state", html.esc(m.get("confidence_state", ""))),
        ("Review", html.esc(review)),
        ("Review after", html.esc(m.get("review_after", ""))),
        ("Expires", html.esc(m.get("expires_at", ""))),
        ("Session", html.link(f"/session/{m['session']}", m["session"]) if m.get("session") else ""),
        ("Embedding", html.esc(m.get("embedding", ""))),
    ]


def _provenance(m: dict[str, Any]) -> str:
    claims = [("Source", html.esc(m.get("source", "")))]
    claims += [(str(k), html.esc(v)) for k, v in (m.get("provenance") or {}).items()]
    return html.dl(claims) if any(v for _, v in claims) else '<p class="empty">No claim recorded.</p>'


def _relations(relations: list[dict[str, Any]]) -> str:
    rows = []
    for r in relations:
        other = r.get("target") or r.get("source") or ""
        arrow = "this → other" if r.get("direction") == "out" else "other → this"
        rows.append([html.esc(r["relation"]), html.esc(arrow), html.link(f"/memory/{other}", other)])
    return html.table(("relation", "direction", "other memory"), rows, empty="No relation.")


def _versions(mid: str, versions: list[dict[str, Any]]) -> str:
    rows = [
        [html.esc(v["revision"]), html.esc(v["action"]), html.who(v.get("by")), html.esc(v["ts"]), html.esc(v["bytes"])]
        for v in versions
    ]
    newest = versions[0]["revision"] if versions else 1
    oldest = versions[-1]["revision"] if versions else 1
    picker = html.form(
        f"/memory/{mid}/diff",
        "",
        html.text_input("a", "From revision", oldest) + html.text_input("b", "To revision", newest),
        "Compare",
        method="get",
    )
    return html.table(("revision", "action", "by", "when", "bytes"), rows) + picker


def _audit(owner: Owner, mid: str) -> str:
    if not owner.has("memory.audit"):
        return ""
    events = owner.call("memory.audit", id=mid, limit=PAGE)["events"]
    rows = [
        [
            html.esc(e["ts"]),
            html.esc(e["type"]),
            html.esc(e.get("label") or e["principal"]),
            html.esc(e.get("revision", "")),
            html.esc(_event_data(e.get("data") or {})),
        ]
        for e in events
    ]
    return "<h2>Audit trail</h2>" + html.table(("when", "event", "by", "revision", "details"), rows)


def _event_data(data: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in data.items())


def actions(owner: Owner, req: Request, m: dict[str, Any]) -> str:
    mid, rev = m["id"], m["revision"]
    if m.get("deleted"):
        restore = html.form(f"/memory/{mid}/restore", req.csrf, "", "Restore")
        return restore + _purge_form(req, mid)
    draft = m["status"] == "draft" and governance.available(owner)
    edit = edit_form(req, m, m["content"], rev, button="Confirm with these edits", action="confirm") if draft else ""
    out = [edit or edit_form(req, m, m["content"], rev), governance.actions(owner, req, m)]
    out.append(html.form(f"/memory/{mid}/delete", req.csrf, html.hidden("revision", rev), "Delete (restorable)"))
    return "".join(out) + _purge_form(req, mid)


def edit_form(req: Request, m: dict[str, Any], content: str, revision: int, *, button: str = "Save",
              action: str = "edit") -> str:  # fmt: skip
    fields = (
        html.hidden("revision", revision)
        + html.text_input("title", "Title", m.get("title", ""))
        + html.select("kind", "Kind", KINDS, m["kind"])
        + html.text_input("tags", "Tags (comma-separated)", ", ".join(m.get("tags", [])))
        + html.textarea("content", "Content", content)
    )
    return "<h3>Edit</h3>" + html.form(f"/memory/{m['id']}/{action}", req.csrf, fields, button)


def _purge_form(req: Request, mid: str) -> str:
    typed = html.text_input("confirm", f"Type {mid} to erase it for good, with every version", "")
    return "<h3>Purge</h3>" + html.form(f"/memory/{mid}/purge", req.csrf, typed, "Purge", danger=True)


def diff(owner: Owner, req: Request, mid: str) -> Response:
    a, b = req.integer("a"), req.integer("b")
    old = owner.call("memory.get", id=mid, revision=a, include_deleted=True)
    new = owner.call("memory.get", id=mid, revision=b, include_deleted=True)
    changed = [
        (name, f"{html.esc(_show(old.get(name)))} → {html.esc(_show(new.get(name)))}")
        for name in ("title", "kind", "tags", "status", "confidence_state")
        if old.get(name) != new.get(name)
    ]
    body = (
        f"<p>{html.link(f'/memory/{mid}', f'Back to {mid}')}</p>"
        + html.dl(changed)
        + html.diff(old["content"], new["content"], f"revision {a}", f"revision {b}")
    )
    return Response(body=html.page(f"Memory {mid}: revision {a} → {b}", body, memories=True))


def _show(value: Any) -> str:
    return ", ".join(value) if isinstance(value, list) else "" if value is None else str(value)


def edit(owner: Owner, req: Request, mid: str) -> Response:
    """Compare-and-swap: a stale revision shows the newer text beside the edit instead of overwriting it."""
    revision, content = req.integer("revision"), req.field("content")
    params = {"title": req.field("title"), "kind": req.field("kind") or None, "content": content}
    tags = req.field("tags")
    try:
        owner.call("memory.update", id=mid, revision=revision, tags=_tags(tags), **params)
    except HivememError as exc:
        if exc.code != "conflict.memory_revision":
            raise
        return _conflict(owner, req, mid, revision or 0, content or "")
    return redirect(f"/memory/{mid}")


def _tags(raw: str | None) -> list[str] | None:
    return None if raw is None else [t.strip() for t in raw.split(",") if t.strip()]


def _conflict(owner: Owner, req: Request, mid: str, revision: int, mine: str) -> Response:
    current = owner.call("memory.get", id=mid, include_deleted=True)
    yours = dict(current, title=req.field("title") or "", tags=_tags(req.field("tags")) or [])
    body = (
        f'<div class="error"><p>Conflict: {html.esc(mid)} changed since you opened it. You edited revision '
        f"{html.esc(revision)}; it is now at revision {html.esc(current['revision'])}, last changed by "
        f"{html.who(current.get('updated_by'))}. Nothing was overwritten.</p></div>"
        "<h2>The newer text</h2>"
        + html.pre(current["content"])
        + "<h2>Your edit compared with it</h2>"
        + html.diff(current["content"], mine, f"revision {current['revision']}", "your edit")
        + edit_form(req, yours, mine, current["revision"], button="Save over the newer text")
        + f"<p>{html.link(f'/memory/{mid}', 'Discard my edit and reload')}</p>"
    )
    return Response(409, html.page(f"Memory {mid}: edit conflict", body, memories=True))


def delete(owner: Owner, req: Request, mid: str) -> Response:
    owner.call("memory.delete", id=mid, revision=req.integer("revision"))
    return redirect(f"/memory/{mid}")


def restore(owner: Owner, req: Request, mid: str) -> Response:
    owner.call("memory.restore", id=mid)
    return redirect(f"/memory/{mid}")


def purge(owner: Owner, req: Request, mid: str) -> Response:
    if (req.field("confirm") or "").strip() != mid:
        raise InvalidParams("range", f"type {mid} exactly to purge it; nothing was erased", param="confirm")
    owner.call("memory.purge", id=mid)
    body = f"<p>{html.esc(mid)} was erased with every version. {html.link('/search', 'Back to search')}</p>"
    return Response(body=html.page("Purged", body))


def not_a_memory(mid: str) -> Response:
    return error_page(404, f"{mid} is not a memory id")
