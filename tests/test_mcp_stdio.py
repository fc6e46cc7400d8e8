"""`hivemem mcp`'s stdio transport, spoken to line by line: garbage, huge lines, files instead of pipes.

A harness talks to `hivemem mcp` over pipes, which the server reads and writes on its event loop
(`hivemem.mcp.stdio`); anything else (a regular file, a terminal) is served by the SDK's own transport.
These tests drive the real process with raw JSON-RPC lines so they can send what no SDK client would.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from conftest import Home, wait_for
from hivemem.manifest import TRUST_SENTENCE
from hivemem.mcp.stdio import FLUSH_AT_EXIT, LINE_LIMIT

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


def line(method: str, params: dict[str, Any], ident: int | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if ident is not None:
        message["id"] = ident
    return json.dumps(message).encode() + b"\n"


def handshake() -> bytes:
    return line("initialize", INIT, 1) + line("notifications/initialized", {})


def call(ident: int, tool: str, **arguments: Any) -> bytes:
    return line("tools/call", {"name": tool, "arguments": arguments}, ident)


def tool_error(result: dict[str, Any]) -> Any:
    """The `{code, message, data}` of a tool error: its only content, a text block; no structured content."""
    assert "structuredContent" not in result, result
    (block,) = result["content"]
    assert block["type"] == "text"
    return json.loads(block["text"])


def spawn(home: Home, stdin: Any, stdout: Any, stderr: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """A `hivemem mcp --tools all` process of this home with the owner's token, on the given stdin and stdout."""
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    argv = [sys.executable, "-m", "hivemem", "mcp", "--tools", "all"]
    return subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=home.base)


class Server:
    """A `hivemem mcp` process fed raw lines on a pipe; answers read from a pipe, or from a file if given."""

    def __init__(self, home: Home, stdout: IO[bytes] | None = None) -> None:
        self.left_blocking = False
        self.in_read, in_write = os.pipe()
        with open(os.path.join(home.base, "mcp-stderr.log"), "ab") as errlog:
            self.proc = spawn(home, self.in_read, stdout or subprocess.PIPE, errlog)
        self.stdin = os.fdopen(in_write, "wb")
        self.file = stdout
        self.buffer = b""
        self.answers: dict[int, dict[str, Any]] = {}

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def answer(self, ident: int, timeout: float = 60.0) -> dict[str, Any]:
        """Wait for the response with this id; every line read must be one JSON-RPC response."""
        if self.file is not None:  # a file gives no readiness to wait on: poll it
            assert wait_for(lambda: self._parsed(Path(self.file.name).read_bytes(), ident), timeout)
            return self.answers[ident]
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while ident not in self.answers:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self.proc.stdout], [], [], left)[0], f"no answer to {ident}"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            assert chunk, f"the server closed stdout; answers so far {sorted(self.answers)}"
            self.buffer += chunk
            self._parse(self.buffer)
        return self.answers[ident]

    def _parse(self, data: bytes) -> None:
        for raw in data.split(b"\n")[:-1]:
            message = json.loads(raw)
            assert message["jsonrpc"] == "2.0" and "id" in message, message
            self.answers[message["id"]] = message

    def _parsed(self, data: bytes, ident: int) -> bool:
        """Parse what the file holds so far; whether the answer to `ident` is among it."""
        self._parse(data)
        return ident in self.answers

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def close(self) -> int:
        """Close stdin (the harness is done) and wait for the exit; then look at the pipe the server read."""
        self.stdin.close()
        code = self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.left_blocking = os.get_blocking(self.in_read)
        os.close(self.in_read)
        return code


def test_garbage_lines_are_skipped_and_the_session_goes_on(home: Home) -> None:
    """Not JSON, not JSON-RPC, invalid UTF-8 and blank lines get no answer; the requests around them do."""
    server = Server(home)
    server.send(handshake())
    assert server.answer(1)["result"]["serverInfo"]["name"] == "hivemem"
    server.send(b"this is not json\n\n   \n")
    server.send(b'{"jsonrpc": "2.0", "id": 2, "method": \xff\xfe}\n')
    server.send(b'["a", "list"]\n{"no": "method"}\n')
    server.send(call(3, "memory_add", space="user", content="stored between garbage lines"))
    assert server.answer(3)["result"]["structuredContent"]["id"] == "m1"
    server.send(call(4, "memory_search", query="garbage lines"))
    found = server.answer(4)["result"]
    assert [h["id"] for h in found["structuredContent"]["results"]] == ["m1"]
    assert found["content"][0]["text"].startswith(TRUST_SENTENCE)
    assert 2 not in server.answers
    assert server.close() == 0


def test_a_line_over_the_limit_is_dropped_and_the_next_request_answered(home: Home) -> None:
    server = Server(home)
    server.send(handshake())
    server.answer(1)
    head = call(2, "memory_add", space="user", content="").rstrip(b"\n")
    server.send(head[:-3] + b"x" * (LINE_LIMIT + 1024) + head[-3:] + b"\n")  # a tool call too long to read
    server.send(call(3, "memory_add", space="user", content="after the huge line"))
    assert server.answer(3)["result"]["structuredContent"]["id"] == "m1"
    server.send(call(4, "memory_add", space="user", content="y" * (5 * 1024 * 1024)))
    huge = server.answer(4)["result"]
    assert huge["isError"] is True and tool_error(huge)["code"] == "invalid_params.frame"
    assert 2 not in server.answers
    assert server.close() == 0
    assert [m["id"] for m in home.ok("memory", "list")["memories"]] == ["m1"]


def test_the_harness_pipe_is_left_blocking(home: Home) -> None:
    """asyncio sets O_NONBLOCK on the pipes it serves; that flag lives on the open file description the
    harness shares, so the server puts it back when it exits."""
    server = Server(home)
    server.send(handshake() + call(2, "whoami"))
    assert server.answer(2)["result"]["structuredContent"]["principal"] == "owner"
    assert server.threads() == 1  # pipes are served on the event loop, without worker threads
    assert server.close() == 0
    assert server.left_blocking  # checked on the harness's copy of the server's stdin


def test_a_regular_file_is_served_by_the_sdk_transport(home: Home, tmp_path: Any) -> None:
    """`hivemem mcp > answers.jsonl`: a file is not a pipe, so the SDK's own transport serves the session."""
    with open(tmp_path / "answers.jsonl", "wb") as answers:
        server = Server(home, stdout=answers)
        server.send(handshake() + b"not json\n")
        server.send(call(2, "memory_add", space="user", content="answered into a file"))
        assert server.answer(2)["result"]["structuredContent"]["id"] == "m1"
        server.send(call(3, "memory_get", id="m1"))
        assert server.answer(3)["result"]["structuredContent"]["content"] == "answered into a file"
        server.send(call(4, "nope_tool"))
        unknown = server.answer(4)["result"]
        assert unknown["isError"] is True and tool_error(unknown)["code"] == "unsupported.verb"
        assert server.threads() > 1  # the SDK transport's worker threads
        assert server.close() == 0
    assert server.left_blocking


def test_answers_buffered_at_eof_reach_a_slow_reader_whole(home: Home) -> None:
    """A harness that closes stdin right after its requests and reads late still gets whole lines only."""
    count = 4
    client = home.client()
    try:
        for n in range(count):
            client.call("memory.add", space="user", content=f"large answer {n} " + "z" * 60_000)
    finally:
        client.close()
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    proc = spawn(home, in_read, out_write)
    os.close(in_read)
    os.close(out_write)
    with os.fdopen(in_write, "wb") as w:  # answers of 120 KB each (the text block repeats the content)
        w.write(handshake() + b"".join(call(2 + n, "memory_get", id=f"m{n + 1}") for n in range(count)))
    time.sleep(FLUSH_AT_EXIT / 2)  # the scenario: a reader that starts late, while the server is at EOF
    with os.fdopen(out_read, "rb") as r:
        data = r.read()
    assert proc.wait(timeout=60) == 0
    assert data.endswith(b"\n")
    answers = [json.loads(raw) for raw in data.splitlines()]  # every line whole
    assert [a["id"] for a in answers] == list(range(1, count + 2))
    for answer in answers[1:]:
        content = answer["result"]["structuredContent"]["content"]
        assert content.startswith(f"large answer {answer['id'] - 2} ") and len(content) > 60_000


def test_sigterm_kills_at_once_and_leaves_the_pipes_blocking(home: Home) -> None:
    """SIGTERM ends the server at once, even while a daemon call hangs, and the pipes are left as found."""
    server = Server(home)
    server.send(handshake() + call(2, "whoami"))
    assert server.answer(2)["result"]["structuredContent"]["principal"] == "owner"
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == -signal.SIGTERM
    server.close()
    assert server.left_blocking

    stalled = Server(home)
    stalled.send(handshake() + call(2, "whoami"))
    stalled.answer(2)
    idle = wait_blocked(stalled.proc.pid)  # waiting for stdin (epoll)
    daemon = home.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGSTOP)
    try:
        stalled.send(call(3, "memory_list"))
        waiting = wait_blocked(stalled.proc.pid, other_than=idle)  # now in a receive from the stopped daemon
        stalled.proc.send_signal(signal.SIGTERM)
        assert stalled.proc.wait(timeout=30) == -signal.SIGTERM, waiting
    finally:
        os.kill(daemon, signal.SIGCONT)
    stalled.close()
    assert stalled.left_blocking
    assert 3 not in stalled.answers


def wait_blocked(pid: int, other_than: str | None = None) -> str:
    """Wait until the single-threaded process sleeps in a system call (other than `other_than`); its number."""
    found: list[str] = []

    def blocked() -> bool:
        with open(f"/proc/{pid}/syscall") as f:
            nr = f.read().split(" ", 1)[0].strip()
        if nr in ("running", "-1", "") or nr == other_than:
            return False
        found.append(nr)
        return True

    assert wait_for(blocked, timeout=30), f"process {pid} never blocked (other than in {other_than})"
    return found[-1]


def test_a_socket_for_stdin_and_stdout_is_served_by_the_sdk_transport(home: Home) -> None:
    """One socket for both (socat, inetd): asyncio's pipe transports would take a readable socket for a closed
    one, so sockets keep the SDK transport."""
    ours, theirs = socket.socketpair()
    proc = spawn(home, theirs, theirs)
    theirs.close()
    ours.settimeout(60)
    reader = ours.makefile("rb")
    ours.sendall(handshake())
    assert json.loads(reader.readline())["id"] == 1
    ours.sendall(call(2, "memory_add", space="user", content="over a socket"))
    assert json.loads(reader.readline())["result"]["structuredContent"]["id"] == "m1"
    ours.sendall(call(3, "whoami"))
    assert json.loads(reader.readline())["result"]["structuredContent"]["principal"] == "owner"
    ours.shutdown(socket.SHUT_WR)
    assert proc.wait(timeout=60) == 0
    reader.close()
    ours.close()


def test_requests_read_before_stdin_closes_are_answered_into_a_file(home: Home, tmp_path: Any) -> None:
    """`hivemem mcp < requests > answers`: the SDK's dispatcher cancels what is still running when input ends,
    which lost the last answer every time; each request read before EOF is now answered first."""
    requests = handshake() + line("tools/list", {}, 2) + call(3, "memory_search", query="anything at all")
    (tmp_path / "requests.jsonl").write_bytes(requests)
    for attempt in range(3):
        with open(tmp_path / "requests.jsonl", "rb") as stdin, open(tmp_path / f"out{attempt}", "wb") as stdout:
            assert spawn(home, stdin, stdout).wait(timeout=60) == 0
        answers = [json.loads(raw) for raw in (tmp_path / f"out{attempt}").read_bytes().splitlines()]
        assert [a["id"] for a in answers] == [1, 2, 3], attempt
        assert answers[2]["result"]["structuredContent"] == {"notice": TRUST_SENTENCE, "mode": "fts", "results": []}


def test_a_pipe_closed_right_after_the_requests_still_gets_every_answer_into_a_file(home: Home, tmp_path: Any) -> None:
    with open(tmp_path / "answers.jsonl", "wb") as answers:
        server = Server(home, stdout=answers)
        server.send(handshake() + line("tools/list", {}, 2) + call(3, "whoami"))
        assert server.close() == 0  # stdin closed at once: nothing was awaited before it
    received = [json.loads(raw) for raw in (tmp_path / "answers.jsonl").read_bytes().splitlines()]
    assert [a["id"] for a in received] == [1, 2, 3]
    assert received[2]["result"]["structuredContent"]["principal"] == "owner"


def test_a_line_that_is_not_json_rpc_is_logged_to_stderr_without_its_text(home: Home) -> None:
    log = Path(home.base) / "mcp-stderr.log"
    server = Server(home)
    server.send(handshake() + b"this is not json zqxmarker\n" + b'{"jsonrpc": "2.0", "zqxmarker": 1}\n')
    server.send(call(2, "whoami"))
    assert server.answer(2)["result"]["structuredContent"]["principal"] == "owner"
    assert server.close() == 0
    logged = [x for x in log.read_text().splitlines() if "not a JSON-RPC message" in x]
    assert len(logged) == 2 and "Invalid JSON" in logged[0], logged
    assert "zqxmarker" not in log.read_text()
