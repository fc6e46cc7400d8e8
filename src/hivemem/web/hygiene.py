"""The hygiene page: memory.hygiene's findings, each with a button for its fix.

Every fix goes through a preview first and is applied only from the preview's form, as a challenge is: a
challenge through the challenge route (whose preview is the verb's own), a relation, an unrelation or an
archive through `/hygiene/fix`, which shows the call it would make. A purge is left to the memory's page,
where it needs the id typed.
"""

from __future__ import annotations

from typing import Any

from hivemem.errors import InvalidParams
from hivemem.web import html
from hivemem.web.app import Owner, Request, Response, redirect

FIXES = ("memory.relate", "memory.unrelate", "memory.archive")  # the verbs /hygiene/fix may call
FIELDS = ("id", "revision", "source", "target", "relation", "reason")
LIMIT = 200


def available(owner: Owner) -> bool:
    return owner.has("memory.hygiene")


def page(owner: Owner, req: Request) -> Response:
    """Findings about what the owner reads (or the spaces asked for), with their reasons and fixes."""
    if not available(owner):
        return Response(404, html.page("Not available", '<p class="empty">This hivemem has no hygiene report.</p>'))
    report = owner.call("memory.hygiene", spaces=req.spaces(), limit=LIMIT)
    rows = [
        [
            html.esc(f["kind"]),
            " ".join(html.link(f"/memory/{m}", m) for m in f["memories"]),
            html.esc(f["space"]),
            html.esc(f["reason"]),
            _fix(req, f),
        ]
        for f in report["findings"]
    ]
    counts = ", ".join(f"{n} {kind}" for kind, n in report["counts"].items() if n) or "no findings"
    more = f" The first {LIMIT} are listed." if report["truncated"] else ""
    body = (
        f"<p>{html.esc(counts)} in {html.esc(report['memories'])} memories.{html.esc(more)} Every fix shows a "
        "preview first; nothing changes until you apply it. Contradictions are candidates: read both first.</p>"
        + html.table(("kind", "memories", "space", "reason", "fix"), rows, empty="No findings: nothing to tidy.")
    )
    return Response(body=html.page("Hygiene", body, memories=True))


def _fix(req: Request, f: dict[str, Any]) -> str:
    verb, params = f["action"]["verb"], f["action"]["params"]
    fields = "".join(html.hidden(k, v) for k, v in params.items() if k != "id")
    if verb == "memory.challenge":
        return html.form(f"/memory/{params['id']}/challenge", req.csrf, fields, f"Preview: {params['outcome']}")
    if verb in FIXES:
        keep = html.hidden("verb", verb) + "".join(html.hidden(k, v) for k, v in params.items())
        return html.form("/hygiene/fix", req.csrf, keep, f"Preview: {verb.split('.')[1]}")
    return html.link(f"/memory/{params['id']}", "Purge on its page")


def fix(owner: Owner, req: Request) -> Response:
    """Without `confirm`: a preview of the call; with it: the call, then back to the report."""
    verb = req.field("verb") or ""
    if verb not in FIXES:
        raise InvalidParams("range", f"verb must be one of {', '.join(FIXES)}", param="verb")
    params: dict[str, Any] = {k: v for k in FIELDS if (v := req.field(k))}
    if "revision" in params:
        params["revision"] = req.integer("revision")
    if req.field("confirm") == "1":
        owner.call(verb, **params)
        return redirect("/hygiene")
    keep = html.hidden("verb", verb) + "".join(html.hidden(k, v) for k, v in params.items())
    apply = html.form("/hygiene/fix", req.csrf, keep + html.hidden("confirm", "1"), f"Apply: {verb.split('.')[1]}",
                      danger=verb != "memory.relate")  # fmt: skip
    call = " ".join(f"{k}={v}" for k, v in params.items())
    body = (
        f"<p>Preview: this would call <code>{html.esc(verb)}</code> with {html.esc(call)}. "
        "Nothing has changed yet.</p>" + apply + f"<p>{html.link('/hygiene', 'Cancel')}</p>"
    )
    return Response(body=html.page(f"Preview: {verb}", body))
