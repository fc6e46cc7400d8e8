"""The only module that prints: JSON for machines, aligned text for people."""

from __future__ import annotations

import json
import sys

from hivemem import records
from hivemem.errors import HivememError
from hivemem.manifest import BY_NAME

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping
    from typing import Any, TextIO


def line(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")


def flush() -> None:
    """Push what was written out now (a long-running command's first lines must reach a pipe at once)."""
    sys.stdout.flush()


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


def on_terminal() -> bool:
    """Whether people read stderr on a terminal (progress is drawn for them only)."""
    return sys.stderr.isatty()


def starting(line: str | None) -> None:
    """A starting daemon's progress (a migration) on one rewritten stderr line, on a terminal only; None ends
    the line."""
    if not sys.stderr.isatty():
        return
    sys.stderr.write("\n" if line is None else f"\rhivemem: {line}\x1b[K")
    sys.stderr.flush()


def note(message: str) -> None:
    """A line for people on stderr, after the result."""
    sys.stderr.write(f"{message}\n")


def warnings(messages: list[str]) -> None:
    for message in messages:
        sys.stderr.write(f"warning: {message}\n")


def progress(done: int, total: int, final: bool) -> None:
    """`scanned N of M` on one rewritten stderr line, on a terminal only (pipes and --json readers see nothing)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\rscanned {done} of {total}" + ("\n" if final else ""))
        sys.stderr.flush()


class Working:
    """Long work in the daemon on one rewritten stderr line, on a terminal only (pipes and --json readers see
    nothing), cleared when the work ends: `LABEL: N s` until the daemon reports progress, then
    `LABEL: STAGE [####------] DONE/TOTAL  N s`, redrawn at each report and every half second (D114).

    `progress` is the callback to hand to the request: None when nothing is shown, so the daemon is not even
    asked for progress frames."""

    WIDTH = 24

    def __init__(self, label: str, shown: bool) -> None:
        self.label, self.shown = label, shown and sys.stderr.isatty()
        self.progress = self._report if self.shown else None
        self._done: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._lock: threading.Lock | None = None
        self._start = 0.0
        self._state: tuple[str, int, int] | None = None

    def __enter__(self) -> Working:
        if self.shown:
            import threading
            import time

            done = threading.Event()
            self._done, self._lock, self._start = done, threading.Lock(), time.monotonic()

            def tick() -> None:
                while True:  # shown at once, so that even quick work says what ran; then every half second
                    self._draw()
                    if done.wait(0.5):
                        break

            self._thread = threading.Thread(target=tick, daemon=True)
            self._thread.start()
        return self

    def _report(self, stage: str, done: int, total: int) -> None:
        self._state = (stage, done, total)
        self._draw()

    def _draw(self) -> None:
        import time

        lock, done = self._lock, self._done
        if lock is None or done is None:  # not entered: nothing is shown
            return
        with lock:
            if done.is_set() and self._thread is None:
                return
            sys.stderr.write(
                f"\r{self.label}: {bar(self._state, self.WIDTH)}{time.monotonic() - self._start:.0f} s \x1b[K"
            )
            sys.stderr.flush()

    def __exit__(self, *exc: object) -> None:
        done, thread, lock = self._done, self._thread, self._lock
        if done is not None and thread is not None and lock is not None:  # all three, once entered
            done.set()
            thread.join()  # its last line is written before the clearing one
            with lock:
                self._thread = None
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()


def bar(state: tuple[str, int, int] | None, width: int) -> str:
    """`STAGE [####------] DONE/TOTAL  ` of a progress report, or nothing before the first one."""
    if state is None:
        return ""
    stage, done, total = state
    if total <= 0:
        return f"{stage} "
    filled = min(width, width * done // total)
    return f"{stage} [{'#' * filled}{'-' * (width - filled)}] {done:,}/{total:,}  "


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def error(exc: HivememError, json_mode: bool) -> int:
    """Print an error (stdout JSON with --json, else stderr) and return its exit code."""
    if json_mode:
        _write(sys.stdout, dumps({"error": exc.to_wire()}))
    else:
        sys.stderr.write(f"error: {exc.code}: {exc.message}\n")
        if exc.data.get("usage"):
            sys.stderr.write(f"{exc.data['usage']}\n")
        fix = exc.data.get("fix") or _cli_fix(exc)
        if fix:
            sys.stderr.write(f"fix: {fix}\n")
    return exc.exit_code


# Hints for people at a terminal, for errors whose wire data carries no fix (the data stays as docs/verbs.md has it).
CLI_FIXES = {
    "conflict.memory_revision": "read it again (hivemem memory get --id ID) and retry with --revision {current}",
    "conflict.client_exists": "choose another --name, or first: hivemem client remove --name {client}",
}


def _cli_fix(exc: HivememError) -> str | None:
    hint = CLI_FIXES.get(exc.code)
    if hint is None:
        return None
    try:
        return hint.format(**exc.data)
    except (KeyError, IndexError, ValueError):
        return None


def result(verb: str, ok: dict[str, Any], json_mode: bool) -> int:
    if json_mode:
        _write(sys.stdout, dumps(ok))
    else:
        _write(sys.stdout, human(verb, ok))
    return 0


def _write(stream: TextIO, text: str) -> None:
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
    if verb == "import" and isinstance(ok.get("items"), list):  # `hivemem import --dry-run`: a preview
        return _preview(ok)
    if ok.get("applied") is False and not {"planned", "findings"} & ok.keys():  # a challenge's preview
        return "\n".join([*_pairs(ok), PREVIEW.format(effect=ok.get("effect", "change"))])
    if isinstance(ok.get("team"), dict) or (ok.get("unavailable") and "schema_version" in ok):
        return _both_stores(ok)
    declared = BY_NAME.get(verb)
    table = records.table_member(declared.result) if declared is not None else None
    if table is not None and isinstance(ok.get(table[0]), list):
        key, shape = table
        cols = _with_store(_with_review(records.columns(shape), ok[key]), ok[key])
        rows = [[_cell(header, member, r) for header, member in cols] for r in ok[key]]
        mode = [f"mode: {ok['mode']}" + (f" (fallback: {ok['fallback']})" if ok.get("fallback") else "")] if (
            "mode" in ok) else []  # fmt: skip
        header = [h for h, _ in cols]
        return "\n".join(mode + (_table([header, *rows]) if rows else [f"no {key}"]) + _footer(ok))
    return "\n".join(_pairs(ok))


def _both_stores(ok: dict[str, Any]) -> str:
    """store status with a team store mounted: the personal and the team store side by side (docs/team.md)."""
    mine = {k: v for k, v in ok.items() if k not in ("team", "unavailable")}
    theirs: dict[str, Any] = ok.get("team") or {}
    keys = [*mine, *(k for k in theirs if k not in mine)]

    def cell(part: dict[str, Any], key: str) -> str:
        value = part.get(key, "")
        return value if isinstance(value, str) else ", ".join(value) if isinstance(value, list) else dumps(value)

    rows = [["", "PERSONAL", "TEAM"], *([key, cell(mine, key), cell(theirs, key)] for key in keys)]
    if not theirs:
        rows = [[key, cell(mine, key)] for key in mine]
        rows.insert(0, ["", "PERSONAL"])
        return "\n".join([*_table(rows), "unavailable: team (the team store did not answer within team.timeout_ms)"])
    return "\n".join(_table(rows))


PREVIEW = "Preview only: nothing was written. To {effect} it, run the same command again with --confirm."


def _with_review(cols: tuple[tuple[str, str], ...], rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Memories with a review state get a REVIEW column before their text, saying why (docs/governance.md)."""
    if not any(r.get("review") for r in rows) or not cols or cols[-1][0] != "TEXT":
        return cols
    return (*cols[:-1], ("REVIEW", "review"), cols[-1])


def _pairs(ok: Mapping[str, object]) -> list[str]:
    width = max((len(k) for k in ok), default=0)
    return [f"{k:<{width}}  {v if isinstance(v, str) else dumps(v)}" for k, v in ok.items()]


def _why(m: dict[str, Any]) -> str:
    """Why a memory needs review (docs/verbs.md): expired since expires_at, due since review_after, or flagged."""
    if m.get("review") == "expired":
        return f"expired {m.get('expires_at', '')}".strip()
    if m.get("review") == "due":
        flagged = m.get("confidence_state") == "needs_review"
        return "due: needs_review" if flagged else f"due {m.get('review_after', '')}"
    return ""


def _preview(ok: dict[str, Any]) -> str:
    """What `hivemem import` would bring in: the file and line each memory comes from."""
    rows = [[f"{i['path']}:{i['line']}", i["kind"], " ".join(i["content"].split())[:70]] for i in ok["items"]]
    return "\n".join((_table([["FROM", "KIND", "TEXT"], *rows]) if rows else ["nothing to import"]) + _footer(ok))


def _with_store(cols: tuple[tuple[str, str], ...], rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """With a team store mounted, a STORE column after SPACE says where each memory lives (docs/team.md)."""
    if not any(r.get("store") for r in rows) or ("SPACE", "space") not in cols:
        return cols
    at = cols.index(("SPACE", "space")) + 1
    return (*cols[:at], ("STORE", "store"), *cols[at:])


def _footer(ok: dict[str, Any]) -> list[str]:
    lines = [f"next: {ok['next']}  (pass --after {ok['next']} for the next page)"] if ok.get("next") else []
    if ok.get("unavailable"):  # a merged read whose team part did not answer in time (docs/team.md)
        lines.append(f"unavailable: {', '.join(ok['unavailable'])} (only what the other stores hold is shown)")
    if isinstance(ok.get("window"), dict):  # the absolute window of a search or list with since/until
        w = ok["window"]
        lines.append(f"window: {w.get('on')} from {w.get('since', 'the start')} to before {w.get('until', 'now')}")
    if isinstance(ok.get("planned"), dict):  # an import's plan
        lines.append("planned: " + ", ".join(f"{n} {what}" for what, n in ok["planned"].items()))
    if isinstance(ok.get("items"), list):  # `hivemem import --dry-run`: the files it would not read, and why
        lines += [f"skipped {s['path']}: {s['why']}" for s in ok.get("skipped") or []]
    if isinstance(ok.get("counts"), dict) and "usage_recorded" in ok:  # memory.hygiene
        lines.append(hygiene_counts(ok))
    if ok.get("versions"):  # memory.history
        lines.append("A version's text: hivemem memory get --id ID --revision N")
    return lines


def hygiene_counts(ok: dict[str, Any]) -> str:
    """One line of a hygiene report's counts: `3 duplicate, 1 stale of 120 memories` (or `no findings`)."""
    found = [f"{n} {kind}" for kind, n in ok["counts"].items() if n]
    shown = f" (first {len(ok['findings'])} listed)" if ok.get("truncated") else ""
    return f"{', '.join(found) or 'no findings'} in {ok['memories']} memories{shown}"


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


def _grants(grants: list[dict[str, str]]) -> str:
    return ", ".join(f"{g.get('right')} {g.get('scope')}" for g in grants)


def _who(item: dict[str, Any]) -> str:
    return str(item.get("label") or item.get("principal") or "")


def _text(m: dict[str, Any]) -> str:
    return ((f"{m['title']}: " if m.get("title") else "") + str(m.get("snippet", "")).replace("\n", " "))[:100]


def _parent(s: dict[str, Any]) -> str:
    return f"{s['relation']} of {s['parent']}" if s.get("parent") else ""


# How a column shows its member, by header (records.COLUMNS names the columns); any other shows the value.
CELLS: dict[str, Any] = {
    "REV": lambda r: f"r{r['revision']}" if r.get("revision") else "",
    "TEXT": _text,
    "BY": lambda r: _who(r["by"]) if "by" in r else _who(r),
    "REPORTED BY": lambda r: _who(r.get("reported_by") or {}),
    "SIZE": lambda r: f"{r['bytes']} bytes",
    "STATUS": lambda r: "deleted",
    "GRANTS": lambda r: _grants(r["grants"]),
    "EXPIRES": lambda r: r.get("expires") or "never",
    "WHERE": lambda r: " ".join(str(r[k]) for k in ("space", "memory", "session") if r.get(k)),
    "DATA": lambda r: dumps(r["data"]) if r.get("data") else "",
    "PARENT": _parent,
    "REVIEW": lambda r: _why(r),
    "IDS": lambda r: ",".join(r["memories"]),
}


def _cell(header: str, member: str, record: dict[str, Any]) -> str:
    shown = CELLS.get(header)
    if shown is not None:
        return str(shown(record))
    value = record.get(member)
    return "" if value is None else str(value)


def help_text(version: str, groups: list[tuple[str, list[tuple[str, str]]]]) -> None:
    """`hivemem --help`: the commands under headings, each once, and the shared sentences once at the end."""
    from hivemem.manifest import SECRET_SENTENCE, TRUST_SENTENCE

    lines = [f"hivemem {version}: a shared, local-first memory store for AI agents", "",
             "usage: hivemem <command> [--param value ...] [--json]"]  # fmt: skip
    width = max(len(n) for _, commands in groups for n, _ in commands)
    for heading, commands in groups:
        lines += ["", f"{heading}:"]
        lines += [f"  {n:<{width}}  {s}" for n, s in commands]
    lines += [
        "",
        f"Commands that print memories: {TRUST_SENTENCE}",
        SECRET_SENTENCE.replace("is refused", "is refused wherever text is stored"),
        "HIVEMEM_TOKEN is the credential (@owner for the owner key).",
        "`hivemem <command> --help` lists a command's params; `hivemem memory` lists a group's commands.",
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
