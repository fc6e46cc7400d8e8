"""The hygiene page: memory.hygiene's findings, each with a button for its fix.

Every fix goes through a preview first and is applied only from the preview's form, as a challenge is: a
challenge through the challenge route (whose preview is the verb's own), a relation, an unrelation or an
archive through `/hygiene/fix`, which shows the call it would make. A purge is left to the memory's page,
where it needs the id typed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hivemem.errors import InvalidParams
from hivemem.records import HygieneFinding
from hivemem.web import html
from hivemem.web.app import Owner, Request, Response, done, notice

FIXES = ("memory.relate", "memory.unrelate", "memory.archive")  # the verbs /hygiene/fix may call
FIELDS = ("id", "revision", "source", "target", "relation", "reason")
LIMIT = 200
COLUMNS = ("finding", "memories", "space", "why", "fix")
COLUMNS_STORE = (*COLUMNS[:3], "store", *COLUMNS[3:])  # with a team store mounted (docs/team.md)


def available(owner: Owner) -> bool:
    return owner.has("memory.hygiene")


KIND_WORDS = {
    "duplicate": ("duplicate", "duplicates"),
    "near_duplicate": ("near duplicate", "near duplicates"),
    "contradiction_candidate": ("possible contradiction", "possible contradictions"),
    "stale": ("stale memory", "stale memories"),
    "unused": ("unused memory", "unused memories"),
    "secret": ("stored secret", "stored secrets"),
    "orphan_relation": ("broken relation", "broken relations"),
}
RELATION_WORDS = {"duplicates": "as a duplicate of", "contradicts": "as contradicting", "supersedes": "as superseding",
                  "related": "as related to", "derived_from": "as derived from"}  # fmt: skip
OUTCOME_WORDS = {"superseded": "superseded", "stale": "stale", "wrong": "wrong", "still_valid": "still valid",
                 "needs_review": "needing review"}  # fmt: skip


def say(verb: str, params: Mapping[str, object]) -> str:
    """A fix as a person says it: `Mark m11 as a duplicate of m9`, never the verb call."""
    source, target = params.get("source", ""), params.get("target", "")
    if verb == "memory.relate":
        return f"Mark {source} {RELATION_WORDS.get(str(params.get('relation', '')), 'as related to')} {target}"
    if verb == "memory.unrelate":
        return f"Remove the {params.get('relation', '')} relation from {source} to {target}"
    if verb == "memory.archive":
        return f"Archive {params.get('id', '')}"
    if verb == "memory.challenge":
        by = f" by {params['replacement']}" if params.get("replacement") else ""
        return f"Mark {params.get('id', '')} as {OUTCOME_WORDS.get(str(params.get('outcome', '')), 'challenged')}{by}"
    if verb == "memory.purge":
        return f"Purge {params.get('id', '')} for good (on its page)"
    return verb


def call_text(verb: str, params: Mapping[str, object]) -> str:
    """The exact call, for those who want it."""
    return verb + " " + " ".join(f"{k}={v}" for k, v in params.items())


def counted(counts: dict[str, int]) -> str:
    """`1 duplicate and 2 possible contradictions`, or `no findings`."""
    parts = [f"{n:,} {KIND_WORDS.get(k, (k, k))[0 if n == 1 else 1]}" for k, n in counts.items() if n]
    if not parts:
        return "No findings"
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def page(owner: Owner, req: Request) -> Response:
    """Findings about what the owner reads (or the spaces asked for), with their reasons and fixes."""
    if not available(owner):
        return Response(404, html.page("Not available", '<p class="empty">This hivemem has no hygiene report.</p>'))
    report = owner.call("memory.hygiene", spaces=req.spaces(), limit=LIMIT)
    store = html.mounted(report, report["findings"])  # each finding says its store with a team store mounted
    rows = [
        [
            html.esc(KIND_WORDS.get(f["kind"], (f["kind"],))[0].capitalize()),
            " ".join(html.id_link(html.memory_href(m), m) for m in f["memories"]),
            html.tok(f["space"]),
            *([html.tok(f.get("store", ""))] if store else []),
            _reason(f["reason"]),
            _fix(req, f),
        ]
        for f in report["findings"]
    ]
    more = f" The first {LIMIT} are listed." if report["truncated"] else ""
    memories = html.plural(int(report["memories"]), "memory", "memories")
    body = (
        f"<p>{html.esc(counted(report['counts']))} in {html.esc(memories)}.{html.esc(more)} Every fix shows a "
        "preview first; nothing changes until you apply it. A possible contradiction is only a candidate: read "
        "both first.</p>"
        + html.team_missing(report, "findings")
        + html.table(COLUMNS_STORE if store else COLUMNS, rows, empty="No findings: nothing to tidy.")
    )
    return Response(body=html.page("Hygiene", body, memories=True, current="/hygiene", notice=notice(req)))


STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def _reason(reason: str) -> str:
    """The report's reason for people: times as local times, the command-line hint as what to do here."""
    reason = reason.replace("(if it still holds: --outcome still_valid)", "(if it still holds, mark it still valid)")
    out, at = [], 0
    for found in STAMP.finditer(reason):
        out += [html.esc(reason[at : found.start()]), html.when(found.group(0))]
        at = found.end()
    return "".join(out) + html.esc(reason[at:])


def _fix(req: Request, f: HygieneFinding) -> str:
    verb, params = f["action"]["verb"], f["action"]["params"]
    said = f"<p>{html.esc(say(verb, params))}</p>"
    fields = "".join(html.hidden(k, v) for k, v in params.items() if k != "id")
    if verb == "memory.challenge":
        return said + html.form(html.memory_href(str(params["id"]), "challenge"), req.csrf, fields, "Preview")
    if verb in FIXES:
        keep = html.hidden("verb", verb) + "".join(html.hidden(k, v) for k, v in params.items())
        return said + html.form("/hygiene/fix", req.csrf, keep, "Preview")
    return html.link(html.memory_href(str(params["id"])), "Purge on its page")


def fix(owner: Owner, req: Request) -> Response:
    """Without `confirm`: a preview of the call; with it: the call, then back to the report."""
    verb = req.field("verb") or ""
    if verb not in FIXES:
        raise InvalidParams("range", f"verb must be one of {', '.join(FIXES)}", param="verb")
    params: dict[str, object] = {k: v for k in FIELDS if (v := req.field(k))}
    if "revision" in params:
        params["revision"] = req.integer("revision")
    if req.field("confirm") == "1":
        owner.call(verb, **params)
        return done("/hygiene", "fixed", fix=verb)
    said = say(verb, params)
    keep = html.hidden("verb", verb) + "".join(html.hidden(k, v) for k, v in params.items())
    apply = html.form("/hygiene/fix", req.csrf, keep + html.hidden("confirm", "1"), f"Apply: {said}",
                      danger=verb != "memory.relate")  # fmt: skip
    body = (
        f"<p>Preview: <strong>{html.esc(said)}</strong>. Nothing has changed yet.</p>"
        f'<details class="call"><summary>The exact call</summary><code>{html.esc(call_text(verb, params))}'
        "</code></details>" + apply + f"<p>{html.link('/hygiene', 'Cancel')}</p>"
    )
    return Response(body=html.page(f"Preview: {said}", body, current="/hygiene"))
