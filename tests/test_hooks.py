"""`hivemem hook` as harnesses run it (docs/hooks.md; conformance C13): the real CLI, a real daemon, read-only, fail
open."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Home, Result, wait_for
from envelopes import mask, parse

EVENT = {"session-start": "SessionStart", "prompt-submit": "UserPromptSubmit"}


@pytest.fixture
def repo(home: Home) -> str:
    """A git checkout whose @project is project/my-repo."""
    path = os.path.join(home.base, "work", "my-repo")
    os.makedirs(os.path.join(path, ".git"))
    os.makedirs(os.path.join(path, "src"))
    return path


@pytest.fixture
def stocked(home: Home, repo: str) -> Iterator[str]:
    """Memories on the read path (project, user, team) and beside it (another project, an agent's notes)."""
    home.config('[recall]\nteam_spaces = ["team/core"]\n')
    for space, kind, content in (
        ("project/other", "convention", "deploy other project with ansible"),
        ("agent/bot", "lesson", "deploy notes of a bot"),
        ("team/core", "lesson", "deploy only on weekdays"),
        ("user", "preference", "prefers to deploy with small steps"),
        ("project/my-repo", "convention", "deploy through make release"),
        ("project/my-repo", "fact", "the api runs on port 8080"),
    ):
        home.ok("memory", "add", "--space", space, "--kind", kind, "--content", content)
    yield repo


def hook(
    home: Home, event: str, stdin: Any, *args: str, token: str | None = "@owner", cwd: str | None = None
) -> Result:
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    return home.cli("hook", event, *args, stdin=data, token=token, cwd=cwd)


def payload(result: Result, event: str) -> str:
    """The additionalContext of a hook's one output line, checked for the exact shape both harnesses read."""
    assert result.code == 0 and result.err == "", result
    assert result.out.endswith("\n") and result.out.count("\n") == 1
    doc = json.loads(result.out)
    assert list(doc) == ["hookSpecificOutput"]
    assert list(doc["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert doc["hookSpecificOutput"]["hookEventName"] == EVENT[event]
    text = str(doc["hookSpecificOutput"]["additionalContext"])
    assert result.out == json.dumps(doc, separators=(",", ":")) + "\n"
    return text


def log_lines(home: Home) -> list[dict[str, Any]]:
    path = os.path.join(home.paths.logs, "hooks.log")
    if not os.path.exists(path):
        return []
    with open(path, encoding="ascii") as f:
        return [json.loads(line) for line in f]


def state(home: Home) -> tuple[Any, ...]:
    db = apsw.Connection(home.paths.store, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return tuple(
            db.execute(sql).fetchall()
            for sql in (
                "SELECT id, revision, updated, status, deleted FROM memories ORDER BY id",
                "SELECT COUNT(*) FROM memory_versions",
                "SELECT COUNT(*), MAX(id) FROM events",
                "SELECT COUNT(*) FROM sessions",
            )
        )
    finally:
        db.close()


def test_session_start_injects_the_read_path_in_order(home: Home, stocked: str) -> None:
    text = payload(
        hook(home, "session-start", {"session_id": "s-1", "cwd": stocked, "source": "startup"}), "session-start"
    )
    records, hidden = parse(text)
    assert [(r["space"], r["content"]) for r in records] == [
        ("project/my-repo", "deploy through make release"),
        ("user", "prefers to deploy with small steps"),
        ("team/core", "deploy only on weekdays"),
    ]
    assert hidden == 0


def test_prompt_submit_searches_with_the_prompt(home: Home, stocked: str) -> None:
    prompt = {
        "session_id": "s-1",
        "cwd": os.path.join(stocked, "src"),
        "prompt": "Which port does the api use?",
        "hook_event_name": "UserPromptSubmit",
        "transcript_path": "/tmp/x.jsonl",
    }
    records, _ = parse(payload(hook(home, "prompt-submit", prompt), "prompt-submit"))
    assert [r["content"] for r in records] == ["the api runs on port 8080"]
    records, _ = parse(payload(hook(home, "prompt-submit", {**prompt, "prompt": "deploy it"}), "prompt-submit"))
    assert [r["space"] for r in records] == ["project/my-repo", "user", "team/core"]


def harness_input(harness: str, event: str, cwd: str, **members: str) -> bytes:
    """The members each harness sends for `event` (Codex's from its hook input schemas), as UTF-8 JSON: the
    harnesses write letters of every script as they are, not as \\u escapes."""
    doc: dict[str, Any] = {"session_id": "0199-hook", "transcript_path": os.path.join(cwd, "t.jsonl"), "cwd": cwd,
                           "hook_event_name": EVENT[event], "permission_mode": "default"}  # fmt: skip
    if harness == "codex":
        doc.update(model="gpt-5-codex", **({"turn_id": "turn-1"} if event == "prompt-submit" else {}))
    doc.update(members)
    return json.dumps(doc, ensure_ascii=False).encode()


# (title, content, a prompt about it, a prompt that is not: one shared common word (我们, "we"), or one
# shared word in a prompt naming someone the store never mentions; docs/decisions.md D282)
SCRIPTS = {
    "chinese": ("服务器部署", "我们的项目使用北京的服务器部署", "我们的服务器在北京吗", "我们今天吃什么"),
    "cyrillic": ("Сервер сборки", "Сервер сборки работает в Москве на порту 9090",
                 "На каком порту работает сервер сборки?", "Какая погода в Москве, спросил Иван?"),
}  # fmt: skip


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_prompt_submit_recalls_text_of_other_scripts_readably(home: Home, repo: str, script: str, harness: str) -> None:
    for title, content, *_ in SCRIPTS.values():
        home.ok("memory", "add", "--space", "project/my-repo", "--title", title, "--content", content)
    home.ok("memory", "add", "--space", "project/my-repo", "--content", "deploy through make release")
    title, content, prompt, one_term = SCRIPTS[script]
    data = harness_input(harness, "prompt-submit", repo, prompt=prompt)
    text = payload(hook(home, "prompt-submit", data, "--harness", harness), "prompt-submit")
    records, _ = parse(text)
    assert [(r["title"], r["content"]) for r in records] == [(title, content)]
    assert f'"title":"{title}"' in text and f'"content":"{content}"' in text, text
    assert "\\u" not in text, "no letter is escaped"
    # Recall's rule on words holds for these scripts too: a prompt about something else recalls nothing.
    alone = hook(home, "prompt-submit", harness_input(harness, "prompt-submit", repo, prompt=one_term))
    assert (alone.code, alone.out, alone.err) == (0, "", "")
    assert log_lines(home) == []


def test_a_codex_fork_recalls_what_a_session_start_recalls(home: Home, stocked: str) -> None:
    texts = {}
    for source in ("startup", "fork"):
        data = harness_input("codex", "session-start", stocked, source=source)
        texts[source] = payload(hook(home, "session-start", data, "--harness", "codex"), "session-start")
    assert mask(texts["fork"]) == mask(texts["startup"])
    assert [(r["space"], r["content"]) for r in parse(texts["fork"])[0]] == [
        ("project/my-repo", "deploy through make release"),
        ("user", "prefers to deploy with small steps"),
        ("team/core", "deploy only on weekdays"),
    ]


def test_without_cwd_the_process_directory_names_the_project(home: Home, stocked: str) -> None:
    text = payload(hook(home, "prompt-submit", {"prompt": "deploy"}, cwd=stocked), "prompt-submit")
    assert parse(text)[0][0]["space"] == "project/my-repo"


def test_claude_code_and_codex_get_identical_payloads(home: Home, stocked: str) -> None:
    for event, data in (
        ("session-start", {"session_id": "a", "cwd": stocked}),
        ("prompt-submit", {"session_id": "a", "cwd": stocked, "prompt": "deploy"}),
    ):
        outs = [hook(home, event, data, *args) for args in ((), ("--harness", "claude-code"), ("--harness=codex",))]
        assert all(payload(r, event) for r in outs)
        assert len({mask(r.out) for r in outs}) == 1
        assert len({r.out for r in outs}) == 3, "every render has its own nonce"


def test_relevance_floor_injects_nothing(home: Home, stocked: str) -> None:
    for prompt in ("is it the", "a I x y ?", "", "   ", "ok"):
        result = hook(home, "prompt-submit", {"cwd": stocked, "prompt": prompt})
        assert (result.code, result.out, result.err) == (0, "", ""), prompt
    assert log_lines(home) == [], "recalling nothing is not a failure"


def test_hooks_write_nothing(home: Home, stocked: str) -> None:
    before = state(home)
    for event in ("session-start", "prompt-submit"):
        for harness in ("claude-code", "codex"):
            data = {"session_id": "z", "cwd": stocked, "prompt": "deploy with make release"}
            assert payload(hook(home, event, data, "--harness", harness), event)
            hook(home, event, b"garbage")
    assert state(home) == before


def test_record_session_reports_a_session_and_no_memory(home: Home, stocked: str) -> None:
    before = state(home)
    for _ in range(2):
        data = {"session_id": "0199-abc", "cwd": stocked}
        assert payload(hook(home, "session-start", data, "--harness", "codex", "--record-session"), "session-start")
    sessions = home.ok("session", "list", "--harness", "codex")["sessions"]
    assert [(s["harness"], s["harness_session"], s["cwd"]) for s in sessions] == [("codex", "0199-abc", stocked)]
    after = state(home)
    assert after[:2] == before[:2], "no memory row or version"
    assert after[2][0][0] == before[2][0][0] + 1 and after[3][0][0] == before[3][0][0] + 1


def test_record_session_failure_still_recalls(home: Home, stocked: str) -> None:
    text = payload(hook(home, "session-start", {"cwd": stocked}, "--record-session"), "session-start")
    assert parse(text)[0]
    assert [e["reason"] for e in log_lines(home)] == ["record-session: the input has no session_id"]
    long_id = {"session_id": "x" * 300, "cwd": stocked}
    assert payload(hook(home, "session-start", long_id, "--record-session"), "session-start")
    assert log_lines(home)[-1]["reason"].startswith("record-session: invalid_params.range")


MALFORMED = {
    "empty": b"",
    "not json": b"{not json",
    "array": b'[{"cwd": "/"}]',
    "string": b'"cwd"',
    "number": b"42",
    "not utf-8": b'{"prompt": "\xff\xfe"}',
    "cwd not a string": b'{"cwd": 5, "prompt": "deploy"}',
    "cwd missing dir": b'{"cwd": "/no/such/dir/anywhere", "prompt": "deploy"}',
    "cwd relative": b'{"cwd": "work/my-repo", "prompt": "deploy"}',
    "prompt missing": b'{"cwd": "/"}',
    "prompt not a string": b'{"cwd": "/", "prompt": ["deploy"]}',
    "session_id not a string": b'{"cwd": "/", "prompt": "deploy", "session_id": 7}',
    "over 1 MiB": b'{"cwd": "/", "prompt": "' + b"deploy " * 150000 + b'"}',
    "deeply nested": b'{"cwd": "/", "x": ' + b"[" * 200000 + b"]" * 200000 + b"}",
}


@pytest.fixture
def one_memory(home: Home, repo: str) -> str:
    home.ok("memory", "add", "--space", "project/my-repo", "--kind", "lesson", "--content", "deploy carefully")
    return repo


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_fails_open_and_is_logged(home: Home, one_memory: str, case: str) -> None:
    before = state(home)
    result = hook(home, "prompt-submit", MALFORMED[case], "--harness", "codex")
    assert (result.code, result.out, result.err) == (0, "", "")
    (entry,) = log_lines(home)
    assert list(entry) == ["ts", "hook", "harness", "reason"]
    assert (entry["hook"], entry["harness"]) == ("prompt-submit", "codex")
    assert entry["reason"] and "deploy" not in entry["reason"]
    assert entry["ts"].endswith("Z") and len(entry["ts"]) == len("2026-11-09T10:00:00.000Z")
    assert stat.S_IMODE(os.stat(os.path.join(home.paths.logs, "hooks.log")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home.paths.logs).st_mode) == 0o700
    assert state(home) == before


def test_input_of_exactly_1_mib_is_read(home: Home, one_memory: str) -> None:
    head, tail = b'{"cwd": "%s", "prompt": "deploy carefully ' % one_memory.encode(), b'"}'
    data = head + b"x" * ((1 << 20) - len(head) - len(tail)) + tail
    assert len(data) == 1 << 20
    records, _ = parse(payload(hook(home, "prompt-submit", data), "prompt-submit"))
    assert [r["content"] for r in records] == ["deploy carefully"]
    assert log_lines(home) == []


def test_bad_arguments_fail_open(home: Home) -> None:
    for args in (("prompt-submit", "--harness", "vim"), ("nonsense",), ("session-start", "--verbose")):
        result = home.cli("hook", *args, stdin=b"{}")
        assert (result.code, result.out, result.err) == (0, "", ""), args
    assert [e["reason"][:6] for e in log_lines(home)] == ["usage:"] * 3
    assert home.cli("hook", "--help").out.startswith("usage: hivemem hook session-start|prompt-submit")


def test_unreachable_daemon_with_explicit_startup_fails_open(home: Home, repo: str) -> None:
    home.config('[daemon]\nstartup = "explicit"\n')
    result = hook(home, "session-start", {"cwd": repo})
    assert (result.code, result.out, result.err) == (0, "", "")
    assert log_lines(home)[0]["reason"].startswith("unavailable.not_running")
    assert home.daemon_pid() is None


def test_a_hook_starts_the_daemon_on_demand(home: Home, repo: str) -> None:
    result = hook(home, "session-start", {"cwd": repo})
    assert (result.code, result.out, result.err) == (0, "", "")
    # On a slow machine the start may outlast the hook's budget; the daemon still comes up for the next hook.
    assert wait_for(lambda: home.daemon_pid() is not None)
    assert all(e["reason"].startswith("unavailable.") for e in log_lines(home))


@pytest.fixture
def silent_daemon(home: Home) -> Iterator[socket.socket]:
    """A socket where the daemon's should be that accepts connections and never answers."""
    os.makedirs(os.path.dirname(home.paths.socket), mode=0o700, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(home.paths.socket)
    sock.listen(8)
    try:
        yield sock
    finally:
        sock.close()
        os.unlink(home.paths.socket)


def test_a_silent_daemon_is_given_up_on_within_the_budget(home: Home, repo: str, silent_daemon: socket.socket) -> None:
    started = time.monotonic()
    result = hook(home, "prompt-submit", {"cwd": repo, "prompt": "deploy"}, token=None)
    elapsed = time.monotonic() - started
    assert (result.code, result.out, result.err) == (0, "", "")
    assert log_lines(home)[0]["reason"].startswith("unavailable.timeout")
    assert elapsed < 3.0, elapsed  # 1.3 s budget after an interpreter start of well under a second


def test_stdin_left_open_is_given_up_on_within_the_budget(home: Home) -> None:
    started = time.monotonic()
    with subprocess.Popen(
        [sys.executable, "-m", "hivemem", "hook", "session-start"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=home.env,
        cwd=home.base,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b'{"cwd": "/"')
        proc.stdin.flush()
        code = proc.wait(timeout=10)  # stdin is still open: the hook must not wait for its end
        out, err = proc.stdout.read(), proc.stderr.read()
    assert (code, out, err) == (0, b"", b"")
    assert time.monotonic() - started < 3.0
    assert log_lines(home)[0]["reason"] == "input: stdin was not closed within the time budget"


def test_a_closed_stdout_does_not_fail_the_hook(home: Home, stocked: str) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hivemem", "hook", "session-start"],
            stdout=write_end,
            input=json.dumps({"cwd": stocked}).encode(),
            stderr=subprocess.PIPE,
            env=dict(home.env, HIVEMEM_TOKEN="@owner"),
            cwd=home.base,
            timeout=30,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, b"")


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
HOOK_INPUT = (
    st.fixed_dictionaries(
        {},
        optional={
            "cwd": st.sampled_from(["/", "/tmp", "relative", ""]) | JSONISH,
            "prompt": st.text() | JSONISH,
            "session_id": st.text(max_size=40) | JSONISH,
            "hook_event_name": JSONISH,
        },
    ).map(lambda d: json.dumps(d).encode())
    | st.binary(max_size=200)
    | JSONISH.map(lambda v: json.dumps(v).encode())
)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["session-start", "prompt-submit"]), HOOK_INPUT)
def test_any_stdin_exits_zero_with_nothing_or_one_payload(home: Home, event: str, data: bytes) -> None:
    result = hook(home, event, data, token=None)
    assert result.code == 0 and result.err == ""
    if result.out:
        parse(payload(result, event))


# The README's memories and the questions a developer asks about them (docs/decisions.md D282).
README_MEMORIES = (
    ("decision", "Zig pin", "We pin Zig 0.13 with .zigversion", "zig"),
    ("convention", "", "Deploys go through make release.", "deploy"),
    ("procedure", "部署", "部署：先在预发布环境验证，然后运行 make release。", "部署"),
    ("fact", "", "The api runs on port 8080.", ""),
    ("lesson", "", "test_payment_retry is flaky in parallel runs; mark it serial.", "tests"),
    ("decision", "", "Payment events go through RabbitMQ, not Kafka.", ""),
)
README_QUESTIONS = {
    "which Zig version does this repo use?": "We pin Zig 0.13 with .zigversion",
    "which zig version do we pin?": "We pin Zig 0.13 with .zigversion",
    "how do we deploy this repo?": "Deploys go through make release.",
    "怎么部署": "部署：先在预发布环境验证，然后运行 make release。",
    "why does test_payment_retry fail?": "test_payment_retry is flaky in parallel runs; mark it serial.",
    "do we use rabbitmq?": "Payment events go through RabbitMQ, not Kafka.",
}
README_UNRELATED = ("What time is it in Tokyo?", "Explain the difference between a list and a tuple.",
                    "thanks, that works", "今天天气怎么样", "How does Alice usually deploy her blog?")  # fmt: skip


@pytest.fixture
def readme(home: Home, repo: str) -> str:
    for kind, title, content, tags in README_MEMORIES:
        home.ok("memory", "add", "--space", "@project", "--kind", kind, "--title", title, "--content", content,
                "--tags", tags, cwd=repo)  # fmt: skip
    return repo


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_natural_questions_recall_their_memory_through_the_hook(home: Home, readme: str, harness: str) -> None:
    for prompt, answer in README_QUESTIONS.items():
        data = harness_input(harness, "prompt-submit", readme, prompt=prompt)
        records, _ = parse(payload(hook(home, "prompt-submit", data, "--harness", harness), "prompt-submit"))
        assert answer in [r["content"] for r in records], (prompt, records)
        assert len(records) <= 2, (prompt, "one rare word recalls what holds it, not the store")
    assert log_lines(home) == []


def test_unrelated_prompts_inject_nothing_through_the_hook(home: Home, readme: str) -> None:
    for prompt in README_UNRELATED:
        result = hook(home, "prompt-submit", harness_input("claude-code", "prompt-submit", readme, prompt=prompt))
        assert (result.code, result.out, result.err) == (0, "", ""), prompt
    assert log_lines(home) == []
