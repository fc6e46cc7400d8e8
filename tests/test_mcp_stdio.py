"""`hivemem mcp`'s stdio transport, spoken to line by line: garbage, huge lines, files instead of pipes.

A harness talks to `hivemem mcp` over pipes, which the server reads and writes on its event loop
(`hivemem.mcp.stdio`); anything else (a regular file, a terminal) is served by the SDK's own transport.
These tests drive the real process with raw JSON-RPC lines so they can send what no SDK client would.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from conftest import Home, wait_for
from hivemem.manifest import TRUST_SENTENCE
from hivemem.mcp.stdio import LINE_LIMIT

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


class Server:
    """A `hivemem mcp` process fed raw lines on a pipe; answers read from a pipe, or from a file if given."""

    def __init__(self, home: Home, stdout: IO[bytes] | None = None) -> None:
        self.left_blocking = False
        env = dict(home.env, HIVEMEM_TOKEN="@owner")
        self.in_read, in_write = os.pipe()
        with open(os.path.join(home.base, "mcp-stderr.log"), "ab") as errlog:
            argv = [sys.executable, "-m", "hivemem", "mcp"]
            out = stdout or subprocess.PIPE
            self.proc = subprocess.Popen(argv, stdin=self.in_read, stdout=out, stderr=errlog, env=env, cwd=home.base)
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
            assert wait_for(lambda: self._parse(Path(self.file.name).read_bytes()) or ident in self.answers, timeout)
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
    assert huge["isError"] is True and huge["structuredContent"]["code"] == "invalid_params.frame"
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
        assert unknown["isError"] is True and unknown["structuredContent"]["code"] == "unsupported.verb"
        assert server.threads() > 1  # the SDK transport's worker threads
        assert server.close() == 0
    assert server.left_blocking
