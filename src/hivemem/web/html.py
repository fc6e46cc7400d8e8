"""HTML building blocks for the review UI. Every value goes through `esc`: stored text shows as text, never markup."""

from __future__ import annotations

import datetime
import difflib
import html
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from hivemem.manifest import TRUST_SENTENCE
from hivemem.records import Author, Hit

NAV = (
    ("/search", "Search"),
    ("/review", "Review"),
    ("/drafts", "Drafts"),
    ("/hygiene", "Hygiene"),
    ("/sessions", "Sessions"),
    ("/clients", "Clients"),
    ("/health", "Health"),
)


def esc(value: object) -> str:
    """Any value as HTML text; quotes escaped too, so the result is safe inside an attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, *, memories: bool = False, nav: Iterable[tuple[str, str]] = NAV, current: str = "",
         notice: str = "") -> str:  # fmt: skip
    """A whole document; pages that show stored text carry the untrusted-data sentence at the top. `current` is
    the menu entry this page is under (marked `aria-current`), `notice` what the last change did."""
    mark = ' aria-current="page"'
    links = "".join(f'<a href="{esc(href)}"{mark if href == current else ""}>{esc(label)}</a>' for href, label in nav)
    trust = f'<p class="trust" role="note">{esc(TRUST_SENTENCE)}</p>' if memories else ""
    said = f'<p class="notice" role="status">{esc(notice)}</p>' if notice else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)} · hivemem</title><link rel="stylesheet" href="/static/style.css">'
        '<link rel="icon" href="/favicon.ico" type="image/svg+xml"></head>'
        f"<body><header><strong>hivemem</strong><nav>{links}</nav></header><main>"
        f"<h1>{esc(title)}</h1>{said}{trust}{body}</main></body></html>"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, empty: str = "Nothing here.") -> str:
    """A table of cells that are already HTML (callers escape what they put in); a table wider than the window
    scrolls sideways in its own box, so words are never broken to fit it (docs/ui.md)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def tok(value: object) -> str:
    """A value that is one token (an id, a kind, a space, a tag, a status): never wrapped inside."""
    return f'<span class="tok">{esc(value)}</span>' if value not in (None, "") else ""


def toks(values: Iterable[object]) -> str:
    """Tokens (tags) separated by commas; lines break between them, never inside one."""
    return ", ".join(tok(v) for v in values)


def plural(n: int, word: str, many: str = "") -> str:
    """`1 result`, `2 results`."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def when(value: object, now: datetime.datetime | None = None) -> str:
    """A stored RFC 3339 time as local time people read (relative within a day: `5 min ago`), the exact value
    on hover (`title`) and in `datetime`; no script, as the page's policy allows none. Unparsable text shows
    as it is."""
    text = "" if value is None else str(value)
    if not text:
        return ""
    try:
        at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return esc(text)
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.UTC)
    now = now or datetime.datetime.now(datetime.UTC)
    local = at.astimezone()
    shown = f"{local.day} {local:%b %Y}, {local:%H:%M}"
    seconds = (now - at).total_seconds()
    if 0 <= seconds < 60:
        shown = "just now"
    elif 0 <= seconds < 3600:
        shown = f"{int(seconds // 60)} min ago"
    elif 0 <= seconds < 86400:
        shown = f"{int(seconds // 3600)} h ago, {local:%H:%M}"
    return f'<time datetime="{esc(text)}" title="{esc(text)}">{esc(shown)}</time>'


def link(href: str, text: object) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def id_link(href: str, text: object) -> str:
    """A link whose text is an id: one token, never wrapped."""
    return f'<a class="tok" href="{esc(href)}">{esc(text)}</a>'


def memory_href(mid: str, action: str = "") -> str:
    """The path of a memory's page (or of an `action` on it): a team store's id `t:m12` travels encoded,
    `/memory/t%3Am12`, so no browser or proxy reads its colon as anything but part of the id."""
    return f"/memory/{quote(mid, safe='')}" + (f"/{action}" if action else "")


def memory_cells(m: Hit, *, store: bool = False) -> list[str]:
    """A memory row's first cells, as every memory table shows them: id (a link), space, (with `store`: the store
    it lives in, when a team store is mounted), kind, title, text."""
    return [
        id_link(memory_href(m["id"]), m["id"]),
        tok(m["space"]),
        *([tok(m.get("store", ""))] if store else []),
        tok(m["kind"]),
        esc(m.get("title", "")),
        esc(m.get("snippet", "")),
    ]


def mounted(result: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a team store is mounted, as a read's result shows it: its rows say their `store`, or it says the
    team store did not answer (docs/team.md)."""
    return "unavailable" in result or any("store" in r for r in rows)


def team_missing(result: Mapping[str, Any], what: str) -> str:
    """The line that says the team store did not answer in time and only the personal store's `what` are shown."""
    if not result.get("unavailable"):
        return ""
    return (f'<p class="fail" role="status">The team store did not answer in time: only the personal store\'s '
            f"{esc(what)} are shown.</p>")  # fmt: skip


def who(item: Author | None) -> str:
    """A principal as `label (principal)`, or just the principal."""
    if not item:
        return ""
    label = item.get("label")
    return esc(f"{label} ({item['principal']})" if label and label != item.get("principal") else item["principal"])


def dl(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (term, HTML) pairs; empty values are left out."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs if v) + "</dl>"


def form(action: str, csrf: str, fields: str, button: str, *, danger: bool = False, method: str = "post") -> str:
    """A form that carries the CSRF token (GET forms do not change anything and carry none)."""
    token = f'<input type="hidden" name="csrf" value="{esc(csrf)}">' if method == "post" else ""
    cls = ' class="danger"' if danger else ""
    return (
        f'<form method="{method}" action="{esc(action)}">{token}{fields}'
        f'<button type="submit"{cls}>{esc(button)}</button></form>'
    )


def hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">'


def text_input(name: str, label: str, value: object = "", *, placeholder: str = "") -> str:
    return (
        f'<label>{esc(label)} <input type="text" name="{esc(name)}" value="{esc(value)}" '
        f'placeholder="{esc(placeholder)}"></label>'
    )


def select(name: str, label: str, choices: Iterable[str], chosen: str = "", *, blank: str = "") -> str:
    options = [f'<option value="">{esc(blank)}</option>'] if blank else []
    options += [f'<option value="{esc(c)}"{" selected" if c == chosen else ""}>{esc(c)}</option>' for c in choices]
    return f'<label>{esc(label)} <select name="{esc(name)}">{"".join(options)}</select></label>'


def textarea(name: str, label: str, value: str, rows: int = 8) -> str:
    return f'<label>{esc(label)}<textarea name="{esc(name)}" rows="{rows}">{esc(value)}</textarea></label>'


def pre(text: str) -> str:
    """Stored text, kept exactly as written (the stylesheet wraps long lines)."""
    return f'<pre class="content">{esc(text)}</pre>'


def diff(old: str, new: str, old_label: str, new_label: str) -> str:
    """A line diff of two texts, every line escaped; two one-line texts are compared word by word, inline."""
    if old == new:
        return '<p class="empty">The two versions have the same text.</p>'
    a, b = old.splitlines() or [""], new.splitlines() or [""]
    if len(a) == 1 and len(b) == 1:
        return _word_diff(old, new, old_label, new_label)
    out = []
    for line in difflib.unified_diff(a, b, old_label, new_label, lineterm="", n=3):
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "hunk" if line[:2] == "@@" else ""
        out.append(f'<span class="{kind}">{esc(line)}</span>')
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def _word_diff(old: str, new: str, old_label: str, new_label: str) -> str:
    a, b = old.split(" "), new.split(" ")
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if op == "equal":
            out.append(esc(" ".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(f'<del class="del">{esc(" ".join(a[i1:i2]))}</del>')
        if j2 > j1:
            out.append(f'<ins class="add">{esc(" ".join(b[j1:j2]))}</ins>')
    legend = f'<span class="del">− {esc(old_label)}</span>  <span class="add">+ {esc(new_label)}</span>\n'
    return '<pre class="diff">' + legend + " ".join(out) + "</pre>"


def bar_chart(title: str, series: dict[str, list[int]], days: list[str]) -> str:
    """Small inline SVG bars, one row per series (e.g. a space), one bar per day, with a date axis, each row's
    scale and total, and the same numbers in a table below; no script, no external file."""
    if not series or not days:
        return f'<p class="empty">{esc(title)}: nothing yet.</p>'
    left, row_h, step, bar_w, axis_h, right = 120, 36, 12, 10, 18, 170
    plot_w = step * len(days)
    width = left + plot_w + right
    rows = []
    for i, (name, values) in enumerate(series.items()):
        top = max(values) or 1
        y0 = i * row_h + row_h - 4
        bars = "".join(
            f'<rect x="{left + step * d}" y="{y0 - 26 * v // top}" width="{bar_w}" height="{max(1, 26 * v // top)}">'
            f"<title>{esc(days[d])}: {v}</title></rect>"
            for d, v in enumerate(values)
            if v
        )
        label = name if len(name) <= 18 else name[:17] + "…"
        scale = f"max {max(values)}/day, {sum(values)} in all"
        rows.append(
            f'<text x="0" y="{y0}">{esc(label)}</text><line x1="{left}" y1="{y0}" x2="{left + plot_w}" y2="{y0}"/>'
            f'<g class="bars">{bars}</g><text x="{left + plot_w + 6}" y="{y0}">{esc(scale)}</text>'
        )
    base = row_h * len(series)
    ticks = sorted({0, len(days) // 2, len(days) - 1})
    axis = "".join(
        f'<line x1="{left + step * d + bar_w / 2}" y1="{base}" x2="{left + step * d + bar_w / 2}" y2="{base + 4}"/>'
        f'<text x="{left + step * d}" y="{base + 14}">{esc(_day(days[d]))}</text>'
        for d in ticks
    )
    height = base + axis_h
    figure = (
        f"<figure><figcaption>{esc(title)} ({esc(_day(days[0]))} to {esc(_day(days[-1]))}; one bar a day, "
        "each row scaled to its own busiest day)</figcaption>"
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{"".join(rows)}{axis}</svg></figure>'
    )
    return figure + _chart_table(series, days)


def _chart_table(series: dict[str, list[int]], days: list[str]) -> str:
    """The chart's numbers: per series its total, the last 7 days and its busiest day."""
    out = []
    for name, values in series.items():
        busiest = max(range(len(values)), key=lambda d: (values[d], d))
        peak = f"{_day(days[busiest])}: {values[busiest]}" if values[busiest] else "none"
        out.append([tok(name), esc(sum(values)), esc(sum(values[-7:])), esc(peak)])
    return table(("space", f"last {len(days)} days", "last 7 days", "busiest day"), out)


def _day(iso_day: str) -> str:
    """`2026-12-05` as `5 Dec`."""
    try:
        d = datetime.date.fromisoformat(iso_day)
    except ValueError:
        return iso_day
    return f"{d.day} {d:%b}"


STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f7f7f4}
header{display:flex;flex-wrap:wrap;gap:.3em 1.5em;align-items:center;padding:.6em 1.2em;background:#23304a;color:#fff}
header nav{display:flex;flex-wrap:wrap;gap:.2em 1em}
header a{color:#dfe7ff;text-decoration:none;padding:.1em .2em;border-bottom:2px solid transparent}
header a:hover{text-decoration:underline}header a[aria-current=page]{color:#fff;border-bottom-color:#f2c94c}
main{max-width:72em;margin:0 auto;padding:1em 1.2em 3em}
.trust{background:#fff6d6;border:1px solid #e4c65b;padding:.4em .8em;border-radius:4px}
.notice{background:#e6f6ea;border:1px solid #8cc79b;padding:.4em .8em;border-radius:4px}
div.table{overflow-x:auto;margin:.4em 0}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border-bottom:1px solid #ddd;padding:.3em .5em;
text-align:left;vertical-align:top}td{overflow-wrap:normal;word-break:normal;hyphens:none}th{white-space:nowrap}
.tok,time,button,td a,.badge{white-space:nowrap}td form{margin:.1em 0}td form label{display:inline}
td select,td input[type=text]{min-width:0;max-width:9em}
pre{white-space:pre-wrap;overflow-wrap:break-word;background:#fff;border:1px solid #ddd;padding:.6em;max-height:40em;
overflow:auto}
.diff .add{color:#0a6b2b;background:#e6f6ea}.diff .del{color:#9b1c1c;background:#fbe9e9}.diff .hunk{color:#555}
form{margin:.6em 0}form.inline{display:inline}label{display:block;margin:.3em 0}
textarea{width:100%;box-sizing:border-box;font:inherit;font-family:ui-monospace,monospace}
input[type=text]{min-width:min(20em,100%);box-sizing:border-box}
.filters label{display:inline-block;margin-right:1em}
button{padding:.3em .9em}button.danger{background:#a52a2a;color:#fff;border:1px solid #7a1f1f}
.error{background:#fbe9e9;border:1px solid #d88;padding:.6em}.ok{color:#0a6b2b}.warn{color:#8a5a00}
.fail{color:#9b1c1c}.empty{color:#666}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}
dt{font-weight:600}dd{margin:0;overflow-wrap:break-word}
section.part{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.2em 1em .8em;margin:1.2em 0}
section.part h2{font-size:1.15em;margin:.6em 0 .4em}
pre.content{font:inherit;font-size:105%;padding:.8em 1em}
.challenge label{display:inline-block;margin-right:1em}.challenge input[type=text]{min-width:10em}
.facts{display:flex;flex-wrap:wrap;gap:.4em .8em;margin:.6em 0}.facts span.fact{white-space:nowrap}
.facts .k{font-weight:600;color:#555;font-size:85%;margin-right:.3em}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}
details.call code{display:block;margin-top:.3em;white-space:pre-wrap}
svg text{font-size:10px;fill:#333}svg .bars rect{fill:#3b6fb6}svg line{stroke:#999}
.pager{margin:1em 0}.badge{font-size:85%;padding:0 .4em;border-radius:3px;background:#e4e8f0}
@media (max-width:700px){main{padding:.6em .6em 2em}figure{margin:1em 0;overflow-x:auto}}
"""

FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#23304a"/>'
    '<path d="M16 5l9 5v12l-9 5-9-5V10z" fill="none" stroke="#f2c94c" stroke-width="3"/></svg>'
)
