"""HTML building blocks for the review UI. Every value goes through `esc`: stored text shows as text, never markup."""

from __future__ import annotations

import difflib
import html
from collections.abc import Iterable
from typing import Any

from hivemem.manifest import TRUST_SENTENCE

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


def page(title: str, body: str, *, memories: bool = False, nav: Iterable[tuple[str, str]] = NAV) -> str:
    """A whole document; pages that show stored text carry the untrusted-data sentence at the top."""
    links = "".join(f'<a href="{esc(href)}">{esc(label)}</a>' for href, label in nav)
    trust = f'<p class="trust" role="note">{esc(TRUST_SENTENCE)}</p>' if memories else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)} · hivemem</title><link rel="stylesheet" href="/static/style.css"></head>'
        f"<body><header><strong>hivemem</strong><nav>{links}</nav></header><main>"
        f"<h1>{esc(title)}</h1>{trust}{body}</main></body></html>"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, empty: str = "Nothing here.") -> str:
    """A table of cells that are already HTML (callers escape what they put in)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def link(href: str, text: object) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def who(item: dict[str, Any] | None) -> str:
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
    """Small inline SVG bars, one row per series (e.g. a space), one bar per day; no script, no external file."""
    if not series or not days:
        return f'<p class="empty">{esc(title)}: nothing yet.</p>'
    left, row_h, bar_w = 110, 34, 10
    width = left + 12 * len(days)
    top = max(max(v) for v in series.values()) or 1
    rows = []
    for i, (name, values) in enumerate(series.items()):
        y0 = i * row_h + row_h - 4
        bars = "".join(
            f'<rect x="{left + 12 * d}" y="{y0 - 26 * v // top}" width="{bar_w}" height="{26 * v // top}">'
            f"<title>{esc(days[d])}: {v}</title></rect>"
            for d, v in enumerate(values)
            if v
        )
        label = name if len(name) <= 18 else name[:17] + "…"
        rows.append(f'<text x="0" y="{y0}">{esc(label)}</text><g class="bars">{bars}</g>')
    height = row_h * len(series)
    return (
        f"<figure><figcaption>{esc(title)} ({esc(days[0])} to {esc(days[-1])})</figcaption>"
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(rows)}</svg></figure>'
    )


STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f7f7f4}
header{display:flex;gap:1.5em;align-items:center;padding:.6em 1.2em;background:#23304a;color:#fff}
header a{color:#dfe7ff;margin-right:1em;text-decoration:none}header a:hover{text-decoration:underline}
main{max-width:70em;margin:0 auto;padding:1em 1.2em 3em}
.trust{background:#fff6d6;border:1px solid #e4c65b;padding:.4em .8em;border-radius:4px}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border-bottom:1px solid #ddd;padding:.3em .5em;
text-align:left;vertical-align:top}td{overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;border:1px solid #ddd;padding:.6em;max-height:40em;
overflow:auto}
.diff .add{color:#0a6b2b;background:#e6f6ea}.diff .del{color:#9b1c1c;background:#fbe9e9}.diff .hunk{color:#555}
form{margin:.6em 0}form.inline{display:inline}label{display:block;margin:.3em 0}
textarea{width:100%;font:inherit;font-family:ui-monospace,monospace}input[type=text]{min-width:20em}
.filters label{display:inline-block;margin-right:1em}
button{padding:.3em .9em}button.danger{background:#a52a2a;color:#fff;border:1px solid #7a1f1f}
.error{background:#fbe9e9;border:1px solid #d88;padding:.6em}.ok{color:#0a6b2b}.warn{color:#8a5a00}
.fail{color:#9b1c1c}.empty{color:#666}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}svg text{font-size:10px}svg .bars rect{fill:#3b6fb6}
.pager{margin:1em 0}.badge{font-size:85%;padding:0 .4em;border-radius:3px;background:#e4e8f0}
"""
