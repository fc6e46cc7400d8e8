"""`hivemem hook session-start|prompt-submit`: recall for the harness, read-only, never in its way.

Every failure (bad arguments, bad input, no daemon, a slow daemon) ends the hook with no output
and exit 0, and appends one JSON line `{ts, hook, harness, reason}` to `logs/hooks.log`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from hivemem import paths, spaces
from hivemem.client import DaemonClient
from hivemem.config import load
from hivemem.errors import HivememError
from hivemem.hooks.harness import EVENTS, HookInput, Refused, output, parse, read_stdin
from hivemem.hooks.harness import system_message as system_message  # cli/main.py says `--requires` with it
from hivemem.manifest import BY_NAME

BUDGET = 1.3  # seconds from entry; interpreter start-up spends the rest of docs/hooks.md's 1.5 s
HARNESSES = ("claude-code", "codex")
USAGE = (
    "usage: hivemem hook session-start|prompt-submit [--harness claude-code|codex] [--client NAME] "
    "[--record-session]\n\n"
    "Reads the harness's hook JSON on stdin and prints the recall envelope as additionalContext.\n"
    "Read-only and fail-open: any problem means no output, exit 0, and a line in logs/hooks.log."
)


@dataclass(frozen=True)
class Options:
    """The hook's command line."""

    event: str
    harness: str = "claude-code"
    record_session: bool = False
    client: str | None = None  # --client NAME: connect with that client's saved token


def run(args: list[str], fd: int = 0) -> str:
    """What to print for `hivemem hook ARGS` with the harness's JSON on `fd`: a payload, usage, or ''."""
    deadline = time.monotonic() + BUDGET
    if "-h" in args or "--help" in args:
        return USAGE
    opts = Options(args[0] if args else "", "")
    try:
        opts = options(args)
        token = saved_token(opts)
        return answer(opts, parse(read_stdin(fd, deadline), opts.event), deadline, token)
    except NoToken as exc:  # the plugin's hook with no usable token: tell the person, once a session, the fix
        log_failure(opts.event, opts.harness, reason(exc.error))
        if opts.event != "session-start":
            return ""
        fix = exc.error.data.get("fix")
        said = f"hivemem: {exc.error.message}, so nothing is recalled."
        return system_message(f"{said} Fix: {fix}" if fix else said)
    except Exception as exc:  # fail open: memory must never block or break the harness
        log_failure(opts.event, opts.harness, reason(exc))
        return ""


class NoToken(Exception):
    """`--client NAME` and no token saved for NAME, or a credential file hivemem refuses to read."""

    def __init__(self, error: HivememError) -> None:
        super().__init__(error.message)
        self.error = error


def saved_token(opts: Options) -> str | None:
    """The token of `--client NAME` (None without the flag: HIVEMEM_TOKEN, else unknown)."""
    if opts.client is None:
        return None
    from hivemem import credentials

    try:
        token = credentials.read(opts.client)
    except HivememError as exc:  # an unsafe or unreadable credential file (denied.path, failed.credentials)
        raise NoToken(exc) from None
    if not token:
        raise NoToken(credentials.no_token(opts.client))
    return token


def options(args: list[str]) -> Options:
    if not args or args[0] not in EVENTS:
        raise Refused(f"usage: unknown hook {args[0][:64] if args else ''!r}")
    values: dict[str, str] = {"--harness": "claude-code"}
    record, rest = False, list(args[1:])
    while rest:
        arg = rest.pop(0)
        flag, equals, value = arg.partition("=")
        if arg == "--record-session":
            record = True
        elif flag in ("--harness", "--client") and (equals or rest):
            values[flag] = value if equals else rest.pop(0)
        else:
            raise Refused(f"usage: unknown argument {arg[:64]!r}")
    harness = values["--harness"]
    if harness not in HARNESSES:
        raise Refused(f"usage: --harness must be one of {', '.join(HARNESSES)}")
    return Options(args[0], harness, record, values.get("--client"))


def answer(opts: Options, hook: HookInput, deadline: float, token: str | None = None) -> str:
    """Recall over the fixed read path of the hook's cwd; the payload, or '' when nothing is recalled."""
    config = load()
    client = DaemonClient(config, token, name=f"hook-{opts.harness}", budget=deadline - time.monotonic())
    try:
        if opts.record_session:
            record_session(client, opts, hook)
        recall = BY_NAME["memory.recall"]
        params: dict[str, object] = {} if hook.prompt is None else {"query": hook.prompt}
        spaces.fill_defaults(recall, params, hook.cwd, config["recall.team_spaces"])
        text = str(client.call(recall.name, **params)["text"])
        if hook.prompt is None and config["recall.hygiene_hint"]:
            hint = review_hint(client, params)
            text = f"{text}\n{hint}" if text and hint else text or hint
    finally:
        client.close()
    return output(opts.event, text) if text else ""


def review_hint(client: DaemonClient, params: dict[str, object]) -> str:
    """`hivemem: 3 memories are due for review (hivemem hygiene)` over the recall's read path, or '' when none
    are (or the count cannot be had: the hint never stands in the way of recall). memory.review is an indexed
    read of one page, so the hint costs one short call, not a whole hygiene report."""
    path = params.get("spaces")
    readable = [s for s in path if isinstance(s, str)] if isinstance(path, list) else []
    try:
        page = client.call("memory.review", spaces=readable, limit=200) if readable else {"memories": []}
    except HivememError:
        return ""
    n = len(page["memories"])
    if not n:
        return ""
    count = f"{n}+ memories are" if page.get("next") else ("1 memory is" if n == 1 else f"{n} memories are")
    return f"hivemem: {count} due for review (hivemem hygiene)"


def record_session(client: DaemonClient, opts: Options, hook: HookInput) -> None:
    """Report the harness's session (a session row, never a memory); a failure is logged, recall goes on."""
    if not hook.session_id:
        log_failure(opts.event, opts.harness, "record-session: the input has no session_id")
        return
    try:
        client.call("session.start", harness=opts.harness, harness_session=hook.session_id, cwd=hook.cwd)
    except HivememError as exc:
        if exc.code.startswith("unavailable."):
            raise
        log_failure(opts.event, opts.harness, f"record-session: {reason(exc)}")


def reason(exc: BaseException) -> str:
    """A short cause for the log: an error code, never memory or prompt text."""
    if isinstance(exc, HivememError):
        return f"{exc.code}: {exc.message}"[:300]
    if isinstance(exc, Refused):
        return str(exc)[:300]
    return f"internal: {type(exc).__name__}"


def log_failure(hook: str, harness: str, why: str) -> None:
    """Append `{ts, hook, harness, reason}` to logs/hooks.log (0600 in a 0700 directory); never raises."""
    try:
        where = paths.resolve()
        paths.ensure_dir(where.logs)
        entry = {"ts": timestamp(), "hook": hook, "harness": harness, "reason": why}
        fd = os.open(os.path.join(where.logs, "hooks.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                     0o600)  # fmt: skip
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii"))
        finally:
            os.close(fd)
    except (OSError, HivememError):
        pass


def timestamp() -> str:
    """RFC 3339 UTC with milliseconds."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
