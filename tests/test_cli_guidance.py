"""A CLI that helps when it is used wrong: nearest commands and flags, a follower that says it follows, help in
groups, doctor's skipped checks, and provenance refused as the rules say (one test per item of the CLI review)."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time

from conftest import Home, client_token, fails


def test_item13_empty_provenance_is_refused_on_add_and_capture(home: Home) -> None:
    for verb in ("add", "capture"):
        error = fails(home, "memory", verb, "--space", "user", "--content", f"{verb} with an empty claim",
                      "--provenance", "{}", code="invalid_params.provenance", exit_code=2)  # fmt: skip
        assert error["data"]["param"] == "provenance" and "kind is required" in error["message"], error
    assert home.ok("memory", "list", "--status", "draft")["memories"] == [], "nothing was half-written"
    assert home.ok("memory", "list")["memories"] == []
    made = home.ok("memory", "add", "--space", "user", "--content", "with a claim", "--provenance", '{"kind":"cli"}')
    assert home.ok("memory", "get", "--id", made["id"])["provenance"] == {"kind": "cli"}
    cleared = home.ok("memory", "update", "--id", made["id"], "--revision", "1", "--provenance", "{}")
    assert cleared["revision"] == 2, "on update an empty object still clears the claim"
    assert "provenance" not in home.ok("memory", "get", "--id", made["id"])


def test_item7_unknown_commands_suggest_the_nearest(home: Home) -> None:
    cases = {
        ("export",): "did you mean 'hivemem store export'?",
        ("memroy", "add"): "did you mean 'hivemem memory add'?",
        ("memory", "ad"): "did you mean 'hivemem memory add'?",
        ("memory", "export"): "did you mean 'hivemem store export'?",
        ("doctr",): "did you mean 'hivemem doctor'?",
    }
    for args, hint in cases.items():
        result = home.cli(*args)
        assert result.code == 2 and hint in result.err, (args, result)
        error = fails(home, *args, code="invalid_params.usage", exit_code=2)
        assert hint in error["message"], (args, error)
    unlike = home.cli("xyzzy")
    assert unlike.code == 2 and "did you mean" not in unlike.err and "hivemem --help" in unlike.err, unlike
    assert home.daemon_pid() is None, "a mistyped command starts nothing"


def test_item7_unknown_options_suggest_the_nearest(home: Home) -> None:
    result = home.cli("memory", "add", "--space", "user", "--contnet", "typo")
    assert result.code == 2, result
    assert "hivemem memory add has no --contnet; did you mean --content?" in result.err, result
    error = fails(home, "memory", "search", "--qeury", "x", code="invalid_params.unknown", exit_code=2)
    assert error["data"]["param"] == "qeury" and "did you mean --query?" in error["message"], error
    far = fails(home, "memory", "list", "--zzzzzz", "1", code="invalid_params.unknown", exit_code=2)
    assert "did you mean" not in far["message"], far
    assert home.ok("memory", "list")["memories"] == [], "nothing was written"


class Stream:
    """A running `hivemem events ...` process whose stdout and stderr are read with deadlines (select)."""

    def __init__(self, home: Home, *args: str) -> None:
        env = dict(home.env, HIVEMEM_TOKEN="@owner")
        self.proc = subprocess.Popen([sys.executable, "-m", "hivemem", *args], env=env, cwd=home.base,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.buffers: dict[int, bytes] = {}

    def line(self, pipe: object, timeout: float = 30) -> str | None:
        fd = pipe.fileno()  # type: ignore[attr-defined]
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffers.get(fd, b""):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffers[fd] = self.buffers.get(fd, b"") + chunk
        line, _, self.buffers[fd] = self.buffers[fd].partition(b"\n")
        return line.decode()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe:
                pipe.close()


def test_item10_follow_with_limit_prints_the_newest_then_follows(home: Home) -> None:
    made = [home.ok("memory", "add", "--space", "a", "--content", f"before {i}")["id"] for i in range(3)]
    shown = re.sub(r"\s+", " ", home.cli("events", "--help").out)
    assert "--limit LIMIT" in shown and "--follow stream new events until interrupted; with --limit N" in shown
    stream = Stream(home, "events", "--follow", "--limit", "2", "--json")
    try:
        first = [stream.line(stream.proc.stdout) for _ in range(2)]
        assert [json.loads(x or "{}").get("memory") for x in first] == made[1:], first
        later = home.ok("memory", "add", "--space", "a", "--content", "while following")["id"]
        line = stream.line(stream.proc.stdout)
        assert line is not None and json.loads(line)["memory"] == later, line
        assert stream.proc.poll() is None, "it follows until interrupted"
    finally:
        stream.close()
    wrong = fails(home, "events", "--follow", "--limit", "2", "--after", "1", code="invalid_params.usage",
                  exit_code=2)  # fmt: skip
    assert "--after" in wrong["message"]


def test_item10_a_follower_says_it_is_following_before_the_first_event(home: Home) -> None:
    home.ok("memory", "add", "--space", "a", "--content", "an old one")
    for args in (("events", "follow"), ("events", "--follow")):
        stream = Stream(home, *args)
        try:
            said = stream.line(stream.proc.stderr)
            assert said == "following new events (Ctrl-C stops)…", (args, said)
            assert stream.proc.stdout and not select.select([stream.proc.stdout], [], [], 0)[0], (
                "no event yet, so nothing on stdout"
            )
            home.ok("memory", "add", "--space", "a", "--content", f"new for {args[1]}")
            line = stream.line(stream.proc.stdout)
            assert line is not None and "memory.added" in line, line
        finally:
            stream.close()
    quiet = Stream(home, "events", "--follow", "--after", "0", "--json")
    try:
        first = quiet.line(quiet.proc.stdout)
        assert first is not None and json.loads(first)["type"] == "memory.added"
        assert quiet.proc.stderr and not select.select([quiet.proc.stderr], [], [], 0)[0], (
            "a --json reader gets events only"
        )
    finally:
        quiet.close()


def doctor_checks(home: Home, token: str | None = "@owner") -> dict[str, dict[str, str]]:
    result = home.cli("doctor", "--json", token=token)
    assert result.code in (0, 1), result
    return {c["id"]: c for c in result.json["checks"]}


def test_item9_doctor_runs_its_checks_through_the_daemon_or_says_it_skipped(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "prefers small pull requests")
    home.ok("memory", "add", "--space", "user", "--content", "Prefers small pull requests!")
    assert home.daemon_pid() is not None
    running = doctor_checks(home)
    assert running["store.integrity"]["status"] == "ok", running["store.integrity"]
    assert running["store.integrity"]["message"].startswith("checked by the running daemon: no finding")
    assert running["secrets.stored"]["status"] == "ok"
    assert "checked by the running daemon" in running["secrets.stored"]["message"]
    hygiene = running["memory.hygiene"]
    assert hygiene["status"] == "warn" and hygiene["message"].startswith("1 finding (1 duplicate)"), hygiene
    owner = home.client()
    try:
        reader = client_token(owner, "reader", [("read", "space:user")])
    finally:
        owner.close()
    stranger = doctor_checks(home, token=reader)  # not an admin: the daemon refuses it the store check
    skipped = stranger["store.integrity"]
    assert skipped["status"] == "warn" and skipped["message"].startswith("skipped: "), skipped
    assert skipped["fix"] == "HIVEMEM_TOKEN=@owner hivemem store check --online", "it says how to run it"
    home.stop_daemon()
    stopped = doctor_checks(home)
    assert stopped["store.integrity"] == {"id": "store.integrity", "status": "ok", "message": "quick check ok",
                                          "fix": ""}  # fmt: skip
    assert stopped["memory.hygiene"]["status"] == "warn" and stopped["memory.hygiene"]["message"].startswith("skipped")
    for checks in (running, stranger, stopped):
        assert not [c for c in checks.values() if c["status"] == "ok" and "skipped" in c["message"]], checks
    assert home.daemon_pid() is None, "doctor never starts the daemon"


def test_item8_help_groups_every_command_once_and_names_them_as_typed(home: Home) -> None:
    from hivemem.cli.groups import EXTRA
    from hivemem.cli.main import TOP
    from hivemem.manifest import TRUST_SENTENCE, VERBS

    result = home.cli("--help")
    assert result.code == 0 and result.err == "", result
    headings = [line[:-1] for line in result.out.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headings == ["Remember and find", "Review", "Sessions and clients", "The store", "The daemon"], headings
    listed = [re.split(r"\s{2,}", line.strip())[0] for line in result.out.splitlines() if line.startswith("  ")]
    every = {*TOP, *(v.cli_name for v in VERBS)} | {f"{g} {n}" for g, names in EXTRA.items() if g not in TOP
                                                    for n in names}  # fmt: skip
    assert sorted(listed) == sorted(every), set(listed) ^ every
    assert result.out.count(TRUST_SENTENCE) == 1, "the untrusted-data sentence once"
    assert result.out.count("Text holding a credential") == 1
    dotted = [f"{v.name}" for v in VERBS if "." in v.name]
    for text in (result.out, home.cli("memory", "add", "--help").out, home.cli("memory", "archive", "--help").out,
                 home.cli("memory", "--help").out):  # fmt: skip
        named = [d for d in dotted if re.search(rf"(?<![\w.]){re.escape(d)}(?![\w])", text)]
        assert named == [], named
    assert "use `hivemem memory capture`" in result.out
    kinds = re.sub(r"\s+", " ", home.cli("memory", "add", "--help").out)
    assert (
        "--kind KIND Kind of memory. One of: note, fact, decision, procedure, preference, convention, task, lesson."
        in kinds
    )


def test_item12_a_changed_number_version_or_negation_is_a_contradiction_candidate(home: Home) -> None:
    add = ("memory", "add", "--space", "project/api", "--content")
    pairs = [
        ("hivemem supports Python 3.9 and newer", "hivemem supports Python 3.11 and newer", "a number or version"),
        ("the build cache holds 200 entries per branch", "the build cache holds 500 entries per branch",
         "a number or version"),
        ("the release job runs the integration suite on tags", "the release job never runs the integration suite "
         "on tags", "a negation"),
    ]  # fmt: skip
    made = [(home.ok(*add, first)["id"], home.ok(*add, second)["id"], what) for first, second, what in pairs]
    home.ok(*add, "API pins Zig with zigversion")
    home.ok(*add, "api pins zig, with zigversion!")
    report = home.ok("hygiene")
    by_pair = {frozenset(f["memories"]): f for f in report["findings"]}
    for first, second, what in made:
        found = by_pair[frozenset((first, second))]
        assert found["kind"] == "contradiction_candidate", found
        assert f"but for {what}" in found["reason"] and found["action"]["params"]["relation"] == "contradicts"
    assert report["counts"]["duplicate"] == 1 and report["counts"]["near_duplicate"] == 0, report["counts"]
