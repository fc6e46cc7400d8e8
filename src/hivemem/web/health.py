"""Store pages: session chains, clients and their grants (read-only), and store health with small charts."""

from __future__ import annotations

import datetime
import re
from collections import Counter
from typing import Any
from urllib.parse import urlencode

from hivemem.errors import HivememError
from hivemem.records import Finding, Session
from hivemem.web import html
from hivemem.web.app import PAGE, Owner, Request, Response
from hivemem.web.memories import memory_table

CHART_DAYS = 30
CHART_EVENTS = 5000  # events read for a chart at most (5 pages of the daemon's maximum), so the page stays fast
CHART_SPACES = 6
FINDINGS_SHOWN = 200  # findings listed on the page at most; the counts cover them all
# Up to this many memories the page runs the store check on every load (about 1 s at 10k); above it, on request
# (about 18 s at 100k on a busy 2-core machine: bench/RESULTS.md).
AUTO_CHECK_MEMORIES = 20000


SESSION_HEADERS = ("session", "harness", "harness session", "parent", "relation", "reported by", "started",
                   "ended")  # fmt: skip
# A session's fields are what its reporter said; an imported one keeps the start time its document gave.
CLAIMED = ("<p>Each session's harness, ids, lineage and start are claims by whoever reported it; an imported session "
           "keeps the start its import document claimed.</p>")  # fmt: skip


def sessions(owner: Owner, req: Request) -> Response:
    page = owner.call("session.list", after=req.arg("after") or None, limit=PAGE)
    rows = [_session_row(s) for s in page["sessions"]]
    more = page.get("next")
    pager = f'<p class="pager">{html.link("/sessions?" + urlencode({"after": more}), "Older →")}</p>' if more else ""
    body = CLAIMED + html.table(SESSION_HEADERS, rows, empty="No session yet.") + pager
    return Response(body=html.page("Sessions", body, current="/sessions"))


def _session_row(s: Session) -> list[str]:
    parent = s.get("parent")
    return [
        html.id_link(f"/session/{s['session']}", s["session"]),
        html.tok(s.get("harness")),
        html.tok(s.get("harness_session", "")),
        html.id_link(f"/session/{parent}", parent) if parent else "",
        html.tok(s.get("relation", "")),
        html.who(s.get("reported_by")),
        html.when(s.get("started")),
        html.when(s.get("ended", "")),
    ]


def session(owner: Owner, req: Request, sid: str) -> Response:
    """One session: its chain of ancestors (claims by the harness that reported them) and its memories."""
    chain = owner.call("session.chain", session=sid)
    memories = owner.call("memory.list", session=sid, limit=PAGE)["memories"]
    headers = SESSION_HEADERS
    note = "<p>The chain starts at the oldest ancestor.</p>" + CLAIMED
    cut = '<p class="empty">The chain is longer than shown.</p>' if chain.get("truncated") else ""
    body = (
        note
        + html.table(headers, [_session_row(s) for s in chain["chain"]])
        + cut
        + "<h2>Memories from this session</h2>"
        + memory_table(memories)
    )
    return Response(body=html.page(f"Session {sid}", body, memories=True, current="/sessions"))


def clients(owner: Owner, req: Request) -> Response:
    listed = owner.call("client.list")["clients"]
    rows = [
        [
            html.tok(c["name"]),
            html.tok(c["principal"]),
            _grants(c.get("grants", [])),
            html.when(c.get("created", "")),
            html.when(c["expires"]) if c.get("expires") else "never",
        ]
        for c in listed
    ]
    note = "<p>Read-only here: add or remove clients with <code>hivemem client add|remove</code>.</p>"
    body = note + html.table(("name", "principal", "grants", "created", "expires"), rows, empty="No client yet.")
    return Response(body=html.page("Clients", body, current="/clients"))


def _grants(grants: list[dict[str, str]]) -> str:
    return ", ".join(html.tok(f"{g['right']} {g['scope']}") for g in grants)


def health(owner: Owner, req: Request) -> Response:
    """Doctor's checks, the store's counts, spaces, and charts of what was added and recalled per day."""
    from hivemem import doctor

    status = owner.call("store.status")
    memories = int(status.get("memories", 0))
    checked: dict[str, Any] | HivememError | None = None
    if memories <= AUTO_CHECK_MEMORIES or req.arg("check") == "1":
        try:
            checked = owner.call("store.check", online=True)
        except HivememError as exc:
            checked = exc
    report = doctor.run(checked=checked if isinstance(checked, dict) else None)
    checks = [_check_row(c) for c in report["checks"]]
    spaces = owner.call("space.list", limit=PAGE)
    space_rows = [
        [
            html.id_link("/search?" + urlencode({"spaces": s["space"]}), s["space"]),
            html.esc(s["memories"]),
            html.when(s.get("updated", "")),
        ]
        for s in spaces["spaces"]
    ]
    body = (
        "<h2>Doctor</h2>"
        + html.table(("status", "check", "finding", "fix"), checks)
        + f"<p>Pending embeddings: {html.esc(status.get('pending', 0))}. {_secrets_line(report['checks'])}</p>"
        + _store_check_section(checked, memories)
        + _stores(status)
        + ("<h2>Spaces of the personal store</h2>" if "team" in status else "<h2>Spaces</h2>")
        + html.table(("space", "memories", "updated"), space_rows, empty="No space yet.")
        + _charts(owner)
    )
    return Response(body=html.page("Store health", body, current="/health"))


def _label(key: str) -> str:
    return key.replace("_", " ").capitalize()


def _stores(status: dict[str, Any]) -> str:
    """The store's counts; with a team store mounted, the personal and the team store side by side (D398), or
    that the team store did not answer in time."""
    mine = {k: v for k, v in status.items() if k not in ("team", "unavailable")}
    theirs = status.get("team")
    if isinstance(theirs, dict):
        keys = [*mine, *(k for k in theirs if k not in mine)]
        rows = [[html.esc(_label(k)), _value(mine.get(k)), _value(theirs.get(k))] for k in keys]
        return '<section id="stores"><h2>Stores</h2>' + html.table(("", "personal", "team"), rows) + "</section>"
    counts = html.dl([(_label(k), html.esc(v)) for k, v in mine.items()])
    if not status.get("unavailable"):
        return "<h2>Store</h2>" + counts
    missing = ('<p class="fail">The team store did not answer within team.timeout_ms: its counts are not shown; '
               "<code>hivemem doctor</code> checks the connection.</p>")  # fmt: skip
    return '<section id="stores"><h2>Stores</h2><h3>Personal</h3>' + counts + "<h3>Team</h3>" + missing + "</section>"


def _value(value: object) -> str:
    """One cell of the stores table: a list (the team's spaces) as tokens, anything else as text; a path or a
    server's URL may break after a `/`, so both columns fit a narrow window."""
    if isinstance(value, list):
        return html.toks(value)
    return html.esc(value).replace("/", "/<wbr>")


def _check_row(c: dict[str, str]) -> list[str]:
    """One doctor check; memory.hygiene links to the Hygiene page, where its findings are."""
    name = html.link("/hygiene", c["id"]) if c["id"] == "memory.hygiene" else html.tok(c["id"])
    return [f'<span class="{html.esc(c["status"])}">{html.esc(c["status"])}</span>', name, html.esc(c["message"]),
            html.esc(c.get("fix", ""))]  # fmt: skip


def _store_check_section(checked: dict[str, Any] | HivememError | None, memories: int) -> str:
    if checked is not None:
        return _store_check(checked)
    ask = html.form("/health#check", "", html.hidden("check", "1"), "Run the store check", method="get")
    why = (f"<p>With {memories:,} memories the check takes a while (it reads every page, row and event), so it runs "
           "when asked; writes go on meanwhile.</p>")  # fmt: skip
    return '<section id="check"><h2>Store check</h2>' + why + ask + "</section>"


def _secrets_line(checks: list[dict[str, str]]) -> str:
    """What doctor's memory.hygiene line found (the report ran once, for doctor), linked to the Hygiene page."""
    line = next((c for c in checks if c["id"] == "memory.hygiene"), None)
    if line is None or line["message"].startswith("skipped"):
        return "Hygiene: not checked."
    found = re.search(r"(\d+) secret", line["message"])
    count = int(found.group(1)) if found else 0
    return f"Hygiene: {line['message']}; secrets found in old rows: {count} ({html.link('/hygiene', 'hygiene')})."


def _store_check(checked: dict[str, Any] | HivememError) -> str:
    """`store check --online`: the daemon checks on one of its read connections, so writes go on meanwhile."""
    if isinstance(checked, HivememError):
        failed = f'<p class="fail">{html.esc(checked.code)}: {html.esc(checked.message)}</p>'
        return f'<section id="check"><h2>Store check</h2>{failed}</section>'
    report = checked
    findings = report["findings"]
    if report["ok"]:
        verdict = '<p><span class="ok">ok</span>: no finding.</p>'
    else:
        verdict = (f'<p><span class="fail">{html.plural(len(findings), "finding")}</span>. '
                   "The full report: <code>HIVEMEM_TOKEN=@owner hivemem store check</code>; search index findings "
                   "are repaired by <code>hivemem store repair-fts</code>, damaged pages and a broken audit chain "
                   "by restoring a backup (docs/operations.md).</p>")  # fmt: skip
    counts = html.table(("check", "findings"), [[html.tok(c), html.esc(n)] for c, n in report["counts"].items()],
                        empty="")  # fmt: skip
    rows = [_finding_row(f) for f in findings[:FINDINGS_SHOWN]]
    more = len(findings) - FINDINGS_SHOWN
    cut = f'<p class="empty">{more} more not shown.</p>' if more > 0 else ""
    skipped = report.get("skipped") or []
    note = (f"<p>Not run here: {html.esc(', '.join(skipped))} (it needs the daemon's writer; "
            "<code>HIVEMEM_TOKEN=@owner hivemem store check</code> runs it).</p>") if skipped else ""  # fmt: skip
    listed = html.table(("check", "memory", "event", "detail"), rows, empty="") + cut
    return '<section id="check"><h2>Store check</h2>' + verdict + counts + listed + note + "</section>"


def _finding_row(found: Finding) -> list[str]:
    memory = found.get("memory")
    return [
        html.tok(found["check"]),
        html.id_link(html.memory_href(memory), memory) if memory else "",
        html.esc(found.get("event", "")),
        html.esc(found["detail"]),
    ]


def _charts(owner: Owner) -> str:
    days = [
        (datetime.datetime.now(datetime.UTC).date() - datetime.timedelta(days=n)).isoformat()
        for n in range(CHART_DAYS - 1, -1, -1)
    ]
    added = _per_day(owner, "memory.added", days[0])
    recalled = _per_day(owner, "memory.recalled", days[0])
    charts = html.bar_chart("Memories added per day, by space", _series(added, days), days)
    if recalled:
        charts += html.bar_chart("Memories recalled per day (usage recording)", _series(recalled, days), days)
    else:
        charts += '<p class="empty">No recall was recorded (usage recording is off unless asked for).</p>'
    return '<section id="activity"><h2>Activity</h2>' + charts + "</section>"


def _per_day(owner: Owner, kind: str, since: str) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    after, read = None, 0
    while read < CHART_EVENTS:
        page = owner.call("events.list", types=[kind], after=after, limit=1000)
        for e in page["events"]:
            if e["ts"][:10] < since:
                return counts
            counts[(e.get("space", "?"), e["ts"][:10])] += 1
        read += len(page["events"])
        after = page.get("next")
        if not after:
            break
    return counts


def _series(counts: Counter[tuple[str, str]], days: list[str]) -> dict[str, list[int]]:
    totals: Counter[str] = Counter()
    for (space, _), n in counts.items():
        totals[space] += n
    return {s: [counts[(s, d)] for d in days] for s, _ in totals.most_common(CHART_SPACES)}
