"""Memory pages: search and list, a memory with its history, diffs and audit, and the owner's edits."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from hivemem.auth import KINDS
from hivemem.dates import resolve
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import MODES, STATUSES
from hivemem.records import Hit, Relation, VersionEntry
from hivemem.web import governance, html
from hivemem.web.app import PAGE, Owner, Request, Response, done, notice

COLUMNS = ("id", "space", "kind", "title", "text", "tags", "status", "updated")
STORES = ("personal", "team")  # the store switch's choices, `all` being none (D399)


def search(owner: Owner, req: Request) -> Response:
    """Search with a query, or list newest first without one; filters for spaces, kinds, tags, status, a time
    window (relative forms resolved here, in this machine's time zone: docs/decisions.md D291) and authors."""
    query, status, mode = req.arg("q").strip(), req.arg("status", "active"), req.arg("mode", "auto")
    store = req.arg("store") if req.arg("store") in STORES else ""
    filters = {
        "spaces": req.spaces(),
        "kinds": req.words("kinds") or None,
        "tags": req.words("tags") or None,
        "since": resolve(req.arg("since").strip()) or None,
        "until": resolve(req.arg("until").strip()) or None,
        "by_created": req.arg("by_created") == "1" or None,
        "authors": req.words("authors") or None,
        "store": store or None,
    }
    if query:
        found = owner.call("memory.search", query=query, mode=mode, limit=PAGE, after=req.arg("after") or None,
                           **filters)  # fmt: skip
        result: dict[str, Any] = found
        rows = [m for m in found["results"] if m.get("status", "active") == status]
        fallback = f" (fell back from {found['fallback']})" if found.get("fallback") else ""
        shown = html.plural(len(rows), "result")
        summary = (f"<p>Mode: <strong>{html.esc(found['mode'])}</strong>{html.esc(fallback)} · {shown}"
                   f"{_window(found.get('window'))}</p>")  # fmt: skip
        pager = _pager(req, found.get("next"), "More results →")
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
        result = listed
        rows = listed["memories"]
        summary = f"<p>Mode: <strong>list</strong> (newest first){_window(listed.get('window'))}</p>"
        pager = _pager(req, listed.get("next"))
    # a team store is mounted when the daemon marks each memory's store, or says the team store did not answer
    mounted = bool(store) or "unavailable" in result or any("store" in m for m in rows)
    body = _filters(req, mounted) + summary + _stores(result, store, mounted) + memory_table(rows) + pager
    return Response(body=html.page("Search", body, memories=True, current="/search", notice=notice(req)))


def _filters(req: Request, mounted: bool) -> str:
    """The filter form; with a team store mounted, a store switch after the spaces (all, personal, team)."""
    switch = html.select("store", "Store", STORES, req.arg("store"), blank="all") if mounted else ""
    fields = (
        html.text_input("q", "Query", req.arg("q"), placeholder="words to look for")
        + html.text_input("spaces", "Spaces", req.arg("spaces"), placeholder="user, project/api")
        + switch
        + html.select("kinds", "Kind", KINDS, req.arg("kinds"), blank="any")
        + html.text_input("tags", "Tags", req.arg("tags"), placeholder="all of these")
        + html.select("status", "Status", STATUSES, req.arg("status", "active"))
        + html.select("mode", "Mode", MODES, req.arg("mode", "auto"))
        + html.text_input("since", "Since", req.arg("since"), placeholder="7d, yesterday, 2026-11-30")
        + html.text_input("until", "Until", req.arg("until"), placeholder="today (not included)")
        + f'<label><input type="checkbox" name="by_created" value="1"{" checked" if req.arg("by_created") else ""}>'
        " by created time</label>"
        + html.text_input("authors", "Authors", req.arg("authors"), placeholder="owner, codex, g3")
        + f'<label><input type="checkbox" name="deleted" value="1"{" checked" if req.arg("deleted") else ""}>'
        " deleted too (lists only)</label>"
    )
    return '<div class="filters">' + html.form("/search", "", fields, "Search", method="get") + "</div>"


def _stores(result: dict[str, Any], store: str, mounted: bool) -> str:
    """A team store that did not answer, said on the page (D399); with both stores answering, nothing: the pager's
    `next` goes on in both stores (D401)."""
    if mounted and result.get("unavailable"):
        return ('<p class="fail" role="status">The team store did not answer in time: only the personal store\'s '
                "memories are shown.</p>")  # fmt: skip
    return ""


def _window(used: dict[str, str] | None) -> str:
    """The absolute window a read used, as the summary shows it."""
    if not used:
        return ""
    since, until = used.get("since", "the start"), used.get("until", "now")
    return html.esc(f" · {used['on']} from {since} to before {until}")


def _pager(req: Request, next_id: str | None, label: str = "Older →") -> str:
    if not next_id:
        return ""
    params = {k: v[0] for k, v in req.query.items() if v and k != "after"}
    return f'<p class="pager">{html.link("/search?" + urlencode({**params, "after": next_id}), label)}</p>'


def memory_table(rows: list[Hit]) -> str:
    """Memories as a table; with a team store mounted (its rows say their `store`), a store column after space."""
    store = any("store" in m for m in rows)
    columns = (*COLUMNS[:2], "store", *COLUMNS[2:]) if store else COLUMNS
    return html.table(columns, (_row(m, store) for m in rows), empty="No memory matches.")


def _row(m: Hit, store: bool) -> list[str]:
    status = m.get("status", "active") + (" (deleted)" if m.get("deleted") else "")
    review = f' <span class="badge">{html.esc(m["review"])}</span>' if m.get("review") else ""
    return [
        *html.memory_cells(m, store=store),
        html.toks(m.get("tags", [])),
        html.tok(status) + review,
        html.when(m.get("updated")),
    ]


def detail(owner: Owner, req: Request, mid: str) -> Response:
    """One memory: its text and the facts a reviewer reads first, the edit form when asked for, the review
    actions, then history, provenance (claims), relations and audit, each in its own section."""
    m = owner.call("memory.get", id=mid, include_deleted=True)
    versions = owner.call("memory.history", id=mid)["versions"]
    title = f"Memory {mid}" + (f": {m['title']}" if m.get("title") else "")
    parts = [
        _facts(m),
        html.pre(m["content"]),
        actions(owner, req, m),
        _part("History", _versions(mid, versions)),
        _part("Provenance: claims by the writer, not verified", _provenance(m)),
        _part("Relations", _relations(m.get("relations", []))),
        _audit(owner, mid),
        _part("Details", html.dl(_fields(m))),
        _part("Purge", _purge_form(req, mid)),
    ]
    said = notice(req, revision=m["revision"])
    return Response(body=html.page(title, "".join(parts), memories=True, current="/search", notice=said))


def _part(heading: str, body: str) -> str:
    return f'<section class="part"><h2>{html.esc(heading)}</h2>{body}</section>'


def _facts(m: dict[str, Any]) -> str:
    """Space, kind, tags and status on one line above the text."""
    status = m["status"] + (" (deleted)" if m.get("deleted") else "")
    facts = [("space", html.tok(m["space"])), ("kind", html.tok(m["kind"])), ("status", html.tok(status))]
    if str(m["id"]).startswith("t:"):  # a team store's memory (docs/team.md)
        facts.insert(1, ("store", html.tok("team")))
    if m.get("review"):
        facts.append(("review", html.tok(m["review"])))
    if m.get("tags"):
        facts.append(("tags", html.toks(m["tags"])))
    facts.append(("revision", html.tok(m["revision"])))
    facts.append(("updated", html.when(m.get("updated"))))
    return (
        '<p class="facts">'
        + "".join(f'<span class="fact"><span class="k">{k}</span> {v}</span>' for k, v in facts)
        + "</p>"
    )


def _fields(m: dict[str, Any]) -> list[tuple[str, str]]:
    deleted = html.when(m.get("deleted"))
    return [
        ("Author", html.who(m.get("author"))),
        ("Updated by", html.who(m.get("updated_by"))),
        ("Created", html.when(m.get("created"))),
        ("Updated", html.when(m.get("updated"))),
        ("Deleted", deleted),
        ("Confidence", html.esc(m.get("confidence"))),
        ("Confidence state", html.tok(m.get("confidence_state", ""))),
        ("Review after", html.when(m.get("review_after", ""))),
        ("Expires", html.when(m.get("expires_at", ""))),
        ("Session", html.link(f"/session/{m['session']}", m["session"]) if m.get("session") else ""),
        ("Embedding", html.esc(m.get("embedding", ""))),
    ]


# What an import copies from its document as given (docs/security.md): the original's author, store and id are
# the document's word, not hivemem's record, and are labelled so wherever they are shown.
IMPORT_CLAIMS = ("original_author", "original_store", "original_id")
IMPORT_NOTE = "as the import document claims"


def _provenance(m: dict[str, Any]) -> str:
    claims = [("Source", html.esc(m.get("source", "")))]
    provenance = m.get("provenance") or {}
    imported = provenance.get("kind") == "import"
    for key, value in provenance.items():
        label = f"{key} ({IMPORT_NOTE})" if imported and key in IMPORT_CLAIMS else str(key)
        claims.append((label, html.esc(value)))
    return html.dl(claims) if any(v for _, v in claims) else '<p class="empty">No claim recorded.</p>'


def _relations(relations: list[Relation]) -> str:
    rows = []
    for r in relations:
        other = r.get("target") or r.get("source") or ""
        arrow = "this → other" if r.get("direction") == "out" else "other → this"
        rows.append([html.tok(r["relation"]), html.esc(arrow), html.id_link(html.memory_href(other), other)])
    return html.table(("relation", "direction", "other memory"), rows, empty="No relation.")


def _versions(mid: str, versions: list[VersionEntry]) -> str:
    rows = [
        [
            html.tok(v["revision"]),
            html.tok(v["action"]),
            html.who(v.get("by")),
            html.when(v["ts"]),
            html.esc(v["bytes"]),
        ]
        for v in versions
    ]
    newest = versions[0]["revision"] if versions else 1
    oldest = versions[-1]["revision"] if versions else 1
    picker = html.form(
        html.memory_href(mid, "diff"),
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
            html.when(e["ts"]),
            html.tok(e["type"]),
            html.esc(e.get("label") or e["principal"]),
            html.tok(e.get("revision", "")),
            _event_data(e["type"], e.get("data") or {}),
        ]
        for e in events
    ]
    return _part("Audit trail", html.table(("when", "event", "by", "revision", "details"), rows))


def _event_data(kind: str, data: dict[str, Any]) -> str:
    """`fields: content, tags`, as HTML; a member with nothing in it (a confirm that changed no field) is left
    out, a hash is shortened (whole on hover) and a score rounded, so the cell wraps between words. What an
    import document says of a memory's origin is marked as its claim."""
    out = []
    for key, value in data.items():
        if value in ("", None, []):
            continue
        if isinstance(value, list):
            shown = html.esc(", ".join(map(str, value)))
        elif isinstance(value, float):
            shown = html.esc(f"{value:.3f}")
        elif isinstance(value, str) and len(value) > 24 and " " not in value:
            shown = f'<span class="tok" title="{html.esc(value)}">{html.esc(value[:12])}…</span>'
        else:
            shown = html.esc(value)
        out.append(f"{html.esc(key)}: {shown}")
    text = "; ".join(out)
    return f"{html.esc(IMPORT_NOTE)}: {text}" if kind == "memory.imported" and text else text


def actions(owner: Owner, req: Request, m: dict[str, Any]) -> str:
    """What a reviewer can do, by status; the edit form stays folded until asked for."""
    mid, rev = m["id"], m["revision"]
    if m.get("deleted"):
        return _part("Deleted", html.form(html.memory_href(mid, "restore"), req.csrf, "", "Restore"))
    draft = m["status"] == "draft" and governance.available(owner)
    if draft:
        edit = edit_form(req, m, m["content"], rev, button="Confirm with these edits", action="confirm",
                         summary="Edit, then confirm")  # fmt: skip
    else:
        edit = edit_form(req, m, m["content"], rev)
    delete = html.form(html.memory_href(mid, "delete"), req.csrf, html.hidden("revision", rev), "Delete (restorable)")
    return _part("Review", edit + governance.actions(owner, req, m) + delete)


def edit_form(req: Request, m: dict[str, Any], content: str, revision: int, *, button: str = "Save",
              action: str = "edit", summary: str = "Edit", opened: bool = False) -> str:  # fmt: skip
    """The edit form, folded in a `<details>` (no script) unless `opened`."""
    fields = (
        html.hidden("revision", revision)
        + html.text_input("title", "Title", m.get("title", ""))
        + html.select("kind", "Kind", KINDS, m["kind"])
        + html.text_input("tags", "Tags (comma-separated)", ", ".join(m.get("tags", [])))
        + html.textarea("content", "Content", content)
    )
    form = html.form(html.memory_href(m["id"], action), req.csrf, fields, button)
    return f'<details class="edit"{" open" if opened else ""}><summary>{html.esc(summary)}</summary>{form}</details>'


def _purge_form(req: Request, mid: str) -> str:
    typed = html.text_input("confirm", f"Type {mid} to erase it for good, with every version", "")
    return html.form(html.memory_href(mid, "purge"), req.csrf, typed, "Purge", danger=True)


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
        f"<p>{html.link(html.memory_href(mid), f'Back to {mid}')}</p>"
        + html.dl(changed)
        + html.diff(old["content"], new["content"], f"revision {a}", f"revision {b}")
    )
    return Response(body=html.page(f"Memory {mid}: revision {a} → {b}", body, memories=True))


def _show(value: object) -> str:
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
    return done(html.memory_href(mid), "saved", mid)


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
        + edit_form(
            req, yours, mine, current["revision"], button="Save over the newer text", opened=True, summary="Your edit"
        )
        + f"<p>{html.link(html.memory_href(mid), 'Discard my edit and reload')}</p>"
    )
    return Response(409, html.page(f"Memory {mid}: edit conflict", body, memories=True))


def delete(owner: Owner, req: Request, mid: str) -> Response:
    owner.call("memory.delete", id=mid, revision=req.integer("revision"))
    back = governance.back(req)
    if back:  # discarded from the drafts queue: back where the reviewer was
        return done(back, "discarded", mid)
    return done(html.memory_href(mid), "deleted", mid)


def restore(owner: Owner, req: Request, mid: str) -> Response:
    owner.call("memory.restore", id=mid)
    return done(html.memory_href(mid), "restored", mid)


def purge(owner: Owner, req: Request, mid: str) -> Response:
    if (req.field("confirm") or "").strip() != mid:
        raise InvalidParams("range", f"type {mid} exactly to purge it; nothing was erased", param="confirm")
    owner.call("memory.purge", id=mid)
    body = f"<p>{html.esc(mid)} was erased with every version. {html.link('/search', 'Back to search')}</p>"
    return Response(body=html.page("Purged", body))
