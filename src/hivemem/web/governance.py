"""Governance pages: the review queue, drafts to confirm or discard, and challenge/confirm/archive actions.

They appear when the daemon's manifest has the governance verbs; destructive challenges preview first.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from hivemem.errors import InvalidParams
from hivemem.records import Hit
from hivemem.web import html
from hivemem.web.app import PAGE, Owner, Request, Response, done, notice

OUTCOMES = ("still_valid", "needs_review", "stale", "wrong", "superseded")
DESTRUCTIVE = ("stale", "wrong", "superseded")
ROWS = ("id", "space", "kind", "title", "text", "why", "updated", "")
STORE_ROWS = (*ROWS[:2], "store", *ROWS[2:])  # with a team store mounted (docs/team.md)
# the only places a confirm or discard returns to: the queue's pages, a merged read's `next` included (D401)
BACK = re.compile(r"/drafts(\?after=(m[0-9]{1,18}|t%3Am[0-9]{1,18}|b1\.[A-Za-z0-9_-]{1,512}))?")


def available(owner: Owner) -> bool:
    return (owner.has("memory.review") and owner.has("memory.confirm") and owner.has("memory.challenge")
            and owner.has("memory.archive"))  # fmt: skip


def _absent() -> Response:
    body = '<p class="empty">This version of hivemem has no review queue or drafts.</p>'
    return Response(404, html.page("Not available", body))


def actions(owner: Owner, req: Request, m: dict[str, Any]) -> str:
    """The governance forms a memory's page offers, by its status."""
    if not available(owner):
        return ""
    mid, rev = m["id"], m["revision"]
    if m["status"] == "draft":
        back = html.hidden("back", "/drafts")
        return "<p>A draft: confirm it as it stands, or edit it first; discard it with Delete.</p>" + (
            html.form(html.memory_href(mid, "confirm"), req.csrf, html.hidden("revision", rev) + back, "Confirm draft")
        )
    if m["status"] == "archived":
        return html.form(html.memory_href(mid, "restore"), req.csrf, "", "Restore from archive")
    fields = (
        html.hidden("revision", rev)
        + html.select("outcome", "Outcome", OUTCOMES)
        + html.text_input("replacement", "Replacement (for superseded)", "", placeholder="m12")
        + html.text_input("reason", "Reason", "")
    )
    return (
        '<div class="challenge">'
        + html.form(html.memory_href(mid, "challenge"), req.csrf, fields, "Challenge")
        + "</div>"
        + html.form(html.memory_href(mid, "archive"), req.csrf, html.hidden("revision", rev), "Archive")
    )


def review(owner: Owner, req: Request) -> Response:
    """Memories due for review or expired, oldest due first, each with its challenge form."""
    if not available(owner):
        return _absent()
    page = owner.call("memory.review", spaces=req.spaces(), after=req.arg("after") or None, limit=PAGE)
    store = html.mounted(page, page["memories"])
    rows = [_row(m, _challenge_inline(req, m), store) for m in page["memories"]]
    body = (
        "<p>Due (review date passed or marked needs_review) and expired memories. "
        "Stale, wrong and superseded outcomes show a preview before anything changes.</p>"
        + html.team_missing(page, "memories")
        + html.table(STORE_ROWS if store else ROWS, rows, empty="Nothing is due for review.")
        + _pager("/review", req, page.get("next"))
    )
    return Response(body=html.page("Review queue", body, memories=True, current="/review", notice=notice(req)))


def drafts(owner: Owner, req: Request) -> Response:
    """Drafts proposed by agents: confirm (optionally after editing) or discard."""
    if not available(owner):
        return _absent()
    page = owner.call("memory.list", status="draft", spaces=req.spaces(), after=req.arg("after") or None, limit=PAGE)
    rows = []
    store = html.mounted(page, page["memories"])
    here = html.hidden("back", "/drafts" + (f"?{urlencode({'after': req.arg('after')})}" if req.arg("after") else ""))
    for m in page["memories"]:
        keep = html.hidden("revision", m["revision"]) + here
        confirm = html.form(html.memory_href(m["id"], "confirm"), req.csrf, keep, "Confirm")
        discard = html.form(html.memory_href(m["id"], "delete"), req.csrf, keep, "Discard")
        rows.append(_row(m, confirm + discard + html.link(html.memory_href(m["id"]), "Edit first"), store))
    body = (
        "<p>Drafts are what agents inferred; they are never searched or recalled until a person confirms them.</p>"
        + html.team_missing(page, "drafts")
        + html.table(STORE_ROWS if store else ROWS, rows, empty="No draft is waiting.")
        + _pager("/drafts", req, page.get("next"))
    )
    return Response(body=html.page("Drafts", body, memories=True, current="/drafts", notice=notice(req)))


def _row(m: Hit, controls: str, store: bool) -> list[str]:
    return [
        *html.memory_cells(m, store=store),
        html.tok(m.get("review", m["status"])),
        html.when(m.get("updated")),
        controls,
    ]


def _challenge_inline(req: Request, m: Hit) -> str:
    fields = html.hidden("revision", m["revision"]) + html.select("outcome", "", OUTCOMES)
    fields += html.text_input("replacement", "", "", placeholder="replacement id")
    return html.form(html.memory_href(m["id"], "challenge"), req.csrf, fields, "Challenge")


def _pager(base: str, req: Request, next_id: str | None) -> str:
    if not next_id:
        return ""
    params = {k: v[0] for k, v in req.query.items() if v and k != "after"}
    return f'<p class="pager">{html.link(base + "?" + urlencode({**params, "after": next_id}), "More →")}</p>'


def challenge(owner: Owner, req: Request, mid: str) -> Response:
    """Apply a non-destructive outcome; a destructive one is previewed and applied only from the preview's form."""
    outcome = req.field("outcome") or ""
    if outcome not in OUTCOMES:
        raise InvalidParams("range", f"outcome must be one of {', '.join(OUTCOMES)}", param="outcome")
    params = {
        "id": mid,
        "revision": req.integer("revision"),
        "outcome": outcome,
        "reason": req.field("reason") or None,
        "replacement": req.field("replacement") or None,
    }
    confirmed = req.field("confirm") == "1" and outcome in DESTRUCTIVE
    result = owner.call("memory.challenge", **params, confirm=True if confirmed else None)
    if result.get("applied"):
        return done(html.memory_href(mid), "challenged", mid, outcome=outcome)
    return _preview(owner, req, mid, params, result)


def _preview(owner: Owner, req: Request, mid: str, params: dict[str, Any], result: dict[str, Any]) -> Response:
    m = owner.call("memory.get", id=mid)
    keep = "".join(html.hidden(k, v) for k, v in params.items() if k != "id" and v is not None)
    apply = html.form(
        html.memory_href(mid, "challenge"),
        req.csrf,
        keep + html.hidden("confirm", "1"),
        f"Apply: {params['outcome']}",
        danger=True,
    )
    replacement = f" and record that {params['replacement']} supersedes it" if params.get("replacement") else ""
    body = (
        f"<p>Preview: challenging {html.esc(mid)} as <strong>{html.esc(params['outcome'])}</strong> would "
        f"{html.esc(result.get('effect', 'change'))} it (confidence state deprecated){html.esc(replacement)}. "
        "Nothing has changed yet.</p>"
        + html.pre(m["content"])
        + apply
        + f"<p>{html.link(html.memory_href(mid), 'Cancel')}</p>"
    )
    return Response(body=html.page(f"Preview: challenge {mid}", body, memories=True))


def confirm(owner: Owner, req: Request, mid: str) -> Response:
    """Confirm a draft as it stands, or with the edits its form carries (only the fields the form sent)."""
    tags = req.field("tags")
    edits = {
        "content": req.field("content"),
        "title": req.field("title"),
        "kind": req.field("kind") or None,
        "tags": None if tags is None else [t.strip() for t in tags.split(",") if t.strip()],
    }
    owner.call("memory.confirm", id=mid, revision=req.integer("revision"), **edits)
    return done(back(req) or "/drafts", "confirmed", mid)


def back(req: Request) -> str:
    """Where a change from the drafts queue returns: the queue's page the form came from; nothing else."""
    where = req.field("back") or ""
    return where if BACK.fullmatch(where) else ""


def archive(owner: Owner, req: Request, mid: str) -> Response:
    owner.call("memory.archive", id=mid, revision=req.integer("revision"))
    return done(html.memory_href(mid), "archived", mid)
