"""The only module that prints: JSON for machines, aligned text for people."""

from __future__ import annotations

import json
import sys

from hivemem.errors import HivememError

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any


def line(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def payload(text: str) -> None:
    """A hook's output line, if any; a closed stdout is ignored, since a hook never fails its harness."""
    if not text:
        return
    try:
        line(text)
        sys.stdout.flush()
    except OSError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second failure at exit


def warnings(messages: list[str]) -> None:
    for message in messages:
        sys.stderr.write(f"warning: {message}\n")


def progress(done: int, total: int, final: bool) -> None:
    """`scanned N of M` on one rewritten stderr line, on a terminal only (pipes and --json readers see nothing)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\rscanned {done} of {total}" + ("\n" if final else ""))
        sys.stderr.flush()


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def error(exc: HivememError, json_mode: bool) -> int:
    """Print an error (stdout JSON with --json, else stderr) and return its exit code."""
    if json_mode:
        _write(sys.stdout, dumps({"error": exc.to_wire()}))
    else:
        sys.stderr.write(f"error: {exc.code}: {exc.message}\n")
        if exc.data.get("usage"):
            sys.stderr.write(f"{exc.data['usage']}\n")
        if exc.data.get("fix"):
            sys.stderr.write(f"fix: {exc.data['fix']}\n")
    return exc.exit_code


def result(verb: str, ok: dict[str, Any], json_mode: bool) -> int:
    if json_mode:
        _write(sys.stdout, dumps(ok))
    else:
        _write(sys.stdout, human(verb, ok))
    return 0


def _write(stream: Any, text: str) -> None:
    """Write text; characters the terminal cannot encode are escaped rather than crashing."""
    data = (text + "\n").encode("utf-8", "backslashreplace")
    try:
        stream.flush()
        stream.buffer.write(data)
        stream.flush()
    except BrokenPipeError:  # `hivemem events | head`: the reader has gone, which is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        raise SystemExit(0) from None


def human(verb: str, ok: dict[str, Any]) -> str:
    if isinstance(ok.get("text"), str):
        return str(ok["text"])  # a rendered envelope (memory.recall) is already text for its reader
    if verb == "doctor":
        return _doctor(ok["checks"])
    for key, (header, render) in TABLES.items():
        if isinstance(ok.get(key), list):
            rows = [render(r) for r in ok[key]]
            mode = (
                [f"mode: {ok['mode']}" + (f" (fallback: {ok['fallback']})" if ok.get("fallback") else "")]
                if "mode" in ok
                else []
            )
            return "\n".join(mode + (_table([list(header), *rows]) if rows else [f"no {key}"]) + _footer(verb, ok))
    width = max((len(k) for k in ok), default=0)
    return "\n".join(f"{k:<{width}}  {v if isinstance(v, str) else dumps(v)}" for k, v in ok.items())


def _footer(verb: str, ok: dict[str, Any]) -> list[str]:
    lines = [f"next: {ok['next']}  (pass --after {ok['next']} for the next page)"] if ok.get("next") else []
    if isinstance(ok.get("planned"), dict):  # an import's plan
        lines.append("planned: " + ", ".join(f"{n} {what}" for what, n in ok["planned"].items()))
    if ok.get("versions"):  # memory.history
        lines.append("A version's text: hivemem memory get --id ID --revision N")
    return lines


def _doctor(checks: list[dict[str, str]]) -> str:
    """Doctor's checks as a table; a check's fix goes on the line below it, under its id."""
    lines = _table([["STATUS", "CHECK", "MESSAGE"], *([c["status"], c["id"], c["message"]] for c in checks)])
    indent = " " * lines[0].index("CHECK")
    out = lines[:1]
    for line, check in zip(lines[1:], checks, strict=True):
        out += [line, *([f"{indent}fix: {check['fix']}"] if check.get("fix") else [])]
    return "\n".join(out)


def _table(rows: list[list[str]]) -> list[str]:
    """Rows as aligned columns, two spaces apart; the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip() for r in rows]


def _memory_row(m: dict[str, Any]) -> list[str]:
    text = (f"{m['title']}: " if m.get("title") else "") + str(m.get("snippet", "")).replace("\n", " ")
    return [m["id"], f"r{m['revision']}", m["space"], m["kind"], text[:100]]


def _grants(grants: list[dict[str, str]]) -> str:
    return ", ".join(f"{g.get('right')} {g.get('scope')}" for g in grants)


def _who(item: dict[str, Any]) -> str:
    return str(item.get("label") or item.get("principal") or "")


def _event_row(e: dict[str, Any]) -> list[str]:
    where = " ".join(str(e[k]) for k in ("space", "memory", "session") if e.get(k))
    rev = f"r{e['revision']}" if e.get("revision") else ""
    return [str(e["id"]), e["ts"], e["type"], _who(e), where, rev, dumps(e["data"]) if e.get("data") else ""]


def _session_row(s: dict[str, Any]) -> list[str]:
    parent = f"{s['relation']} of {s['parent']}" if s.get("parent") else ""
    reporter = _who(s.get("reported_by") or {})
    started, ended = s["started"], s.get("ended", "")
    return [s["session"], s["harness"], s.get("harness_session", ""), parent, reporter, started, ended]


TABLES: dict[str, tuple[tuple[str, ...], Any]] = {
    "results": (("ID", "REV", "SPACE", "KIND", "TEXT"), _memory_row),
    "memories": (("ID", "REV", "SPACE", "KIND", "TEXT"), _memory_row),
    "versions": (
        ("REV", "ACTION", "BY", "TIME", "SIZE"),
        lambda v: [f"r{v['revision']}", v["action"], _who(v["by"]), v["ts"], f"{v['bytes']} bytes"],
    ),
    "spaces": (("SPACE", "MEMORIES", "UPDATED"), lambda s: [s["space"], str(s["memories"]), s["updated"] or ""]),
    "deleted": (("ID", "REV", "STATUS"), lambda d: [d["id"], f"r{d['revision']}", "deleted"]),
    "items": (  # `hivemem import --dry-run`: what would come in, from which file and line
        ("FROM", "KIND", "TEXT"),
        lambda i: [f"{i['path']}:{i['line']}", i["kind"], " ".join(i["content"].split())[:70]],
    ),
    "clients": (
        ("NAME", "PRINCIPAL", "GRANTS", "CREATED", "EXPIRES"),
        lambda c: [c["name"], c["principal"], _grants(c["grants"]), c["created"], c.get("expires") or "never"],
    ),
    "events": (("ID", "TIME", "TYPE", "BY", "WHERE", "REV", "DATA"), _event_row),
    "sessions": (("SESSION", "HARNESS", "HARNESS SESSION", "PARENT", "REPORTED BY", "STARTED", "ENDED"), _session_row),
    "chain": (("SESSION", "HARNESS", "HARNESS SESSION", "PARENT", "REPORTED BY", "STARTED", "ENDED"), _session_row),
}


def help_text(version: str, top: dict[str, str], verbs: list[tuple[str, str]]) -> None:
    lines = [f"hivemem {version}: a shared, local-first memory store for AI agents", "",
             "usage: hivemem <group> <verb> [--param value ...] [--json]", "", "commands:"]  # fmt: skip
    width = max(len(n) for n, _ in [*top.items(), *verbs])
    commands = {**top, **{n: s for n, s in verbs if n not in top}}
    lines += [f"  {n:<{width}}  {s}" for n, s in commands.items()]
    lines += [
        "",
        "HIVEMEM_TOKEN is the credential (@owner for the owner key).",
        "`hivemem <group> <verb> --help` lists params.",
    ]
    line("\n".join(lines))


def event(e: dict[str, Any], json_mode: bool) -> None:
    """One audit event per line (JSON with --json)."""
    if json_mode:
        _write(sys.stdout, dumps(e))
        return
    who = e.get("label") or e["principal"]
    where = " ".join(str(e[k]) for k in ("space", "memory", "session") if e.get(k))
    rev = f" r{e['revision']}" if e.get("revision") else ""
    data = f" {dumps(e['data'])}" if e.get("data") else ""
    _write(sys.stdout, f"{e['id']:>6}  {e['ts']}  {e['type']:<18} {who:<12} {where}{rev}{data}")
