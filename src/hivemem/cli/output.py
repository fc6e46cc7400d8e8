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
    if verb == "memory.recall":
        return str(ok["text"])  # the envelope is already text for its reader
    for key, render in ROWS.items():
        if isinstance(ok.get(key), list):
            rows = [render(r) for r in ok[key]]
            extra = [f"next: {ok['next']}"] if ok.get("next") else []
            mode = (
                [f"mode: {ok['mode']}" + (f" (fallback: {ok['fallback']})" if ok.get("fallback") else "")]
                if "mode" in ok
                else []
            )
            return "\n".join(mode + (_table(rows) if rows else [f"no {key}"]) + extra)
    if verb == "doctor":
        return "\n".join(_check_line(c) for c in ok["checks"])
    width = max((len(k) for k in ok), default=0)
    return "\n".join(f"{k:<{width}}  {v if isinstance(v, str) else dumps(v)}" for k, v in ok.items())


def _check_line(c: dict[str, str]) -> str:
    return f"{c['status']:<5} {c['id']:<18} {c['message']}" + (f"\n      fix: {c['fix']}" if c.get("fix") else "")


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip() for r in rows]


def _memory_row(m: dict[str, Any]) -> list[str]:
    text = (f"{m['title']}: " if m.get("title") else "") + str(m.get("snippet", "")).replace("\n", " ")
    return [m["id"], f"r{m['revision']}", m["space"], m["kind"], text[:100]]


ROWS: dict[str, Any] = {
    "results": _memory_row,
    "memories": _memory_row,
    "versions": lambda v: [
        f"r{v['revision']}",
        v["action"],
        v["by"].get("label") or v["by"]["principal"],
        v["ts"],
        f"{v['bytes']} bytes",
    ],
    "spaces": lambda s: [s["space"], str(s["memories"]), s["updated"] or ""],
    "deleted": lambda d: [d["id"], f"r{d['revision']}", "deleted"],
}


def help_text(version: str, top: dict[str, str], verbs: list[tuple[str, str]]) -> None:
    lines = [f"hivemem {version}: a shared, local-first memory store for AI agents", "",
             "usage: hivemem <group> <verb> [--param value ...] [--json]", "", "commands:"]  # fmt: skip
    width = max(len(n) for n, _ in [*top.items(), *verbs])
    commands = dict(verbs)
    commands.pop("daemon stop", None)  # shown as `stop`
    commands = {**top, **{n: s for n, s in commands.items() if n not in top}}
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
