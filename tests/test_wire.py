"""The JSON-lines wire (docs/protocol.md) on a raw Unix socket: hello, framing, garbage, pipelining and tokens."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Home
from hivemem import __version__

MAX_FRAME = 4 * 1024 * 1024
INT64 = 1 << 63
WRONG_SECRET = base64.urlsafe_b64encode(bytes(32)).decode().rstrip("=")


class Raw:
    """A bare socket speaking the wire protocol, with no help from hivemem's client."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)  # blocking: a burst of connections waits for the daemon's accept queue
        self.sock.settimeout(20)
        self.buffer = b""
        self.next_id = 100

    def send(self, data: bytes | dict[str, Any]) -> None:
        self.sock.sendall(data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n")

    def line(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def reply(self) -> dict[str, Any]:
        message = json.loads(self.line())
        assert isinstance(message, dict)
        return message

    def call(self, verb: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "verb": verb, "params": params or {}})
        message = self.reply()
        assert message["id"] == self.next_id, message
        return message

    def hello(self, token: str | None = None) -> dict[str, Any]:
        return self.call("hello", {"client": "raw/0", **({"token": token} if token is not None else {})})

    def closed(self) -> bool:
        """Whether the daemon closed this connection (EOF after any pending lines)."""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return True
                self.buffer += chunk
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def owner_key(home: Home) -> str:
    with open(home.paths.owner_key) as f:
        return f.read().strip()


@pytest.fixture
def connect(home: Home) -> Iterator[Any]:
    home.ok("whoami")  # starts the daemon
    opened: list[Raw] = []

    def _open() -> Raw:
        raw = Raw(home.paths.socket)
        opened.append(raw)
        return raw

    yield _open
    for raw in opened:
        raw.close()


def error_of(message: dict[str, Any]) -> str:
    assert "error" in message and "ok" not in message, message
    assert set(message["error"]) == {"code", "message", "data"}
    return str(message["error"]["code"])


def serving(raw: Raw) -> bool:
    return raw.call("whoami")["ok"]["principal"] in ("owner", "unknown")


# hello


def test_hello_reply_shape_for_owner(home: Home, connect: Any) -> None:
    raw = connect()
    message = raw.hello(owner_key(home))
    assert message["id"] == raw.next_id
    hello = message["ok"]
    assert set(hello) == {"principal", "label", "server", "version", "protocol", "store_id"}
    assert (hello["principal"], hello["label"]) == ("owner", "owner")
    assert hello["server"] == f"hivemem {__version__}"
    assert hello["version"] == __version__
    assert hello["protocol"] == 1
    assert hello["store_id"] == home.ok("ping")["store_id"]
    assert len(hello["store_id"]) >= 16


@pytest.mark.parametrize("token", [None, ""])
def test_hello_without_token_is_unknown(connect: Any, token: str | None) -> None:
    raw = connect()
    hello = raw.hello(token)["ok"]
    assert set(hello) == {"principal", "server", "version", "protocol", "store_id"}
    assert hello["principal"] == "unknown"
    assert raw.call("whoami")["ok"]["principal"] == "unknown"
    write = raw.call("memory.add", {"space": "user", "content": "nope"})
    assert error_of(write) == "denied.write"


def test_request_before_hello_is_a_protocol_error(home: Home, connect: Any) -> None:
    raw = connect()
    assert error_of(raw.call("memory.add", {"space": "user", "content": "early"})) == "invalid_params.protocol"
    assert error_of(raw.call("whoami")) == "invalid_params.protocol"
    assert raw.hello(owner_key(home))["ok"]["principal"] == "owner"
    assert raw.call("store.status")["ok"]["memories"] == 0


def test_second_hello_is_a_protocol_error(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello()
    assert error_of(raw.hello(owner_key(home))) == "invalid_params.protocol"
    assert raw.call("whoami")["ok"]["principal"] == "unknown"  # the second hello changed nothing


def test_hello_params_are_checked(connect: Any) -> None:
    raw = connect()
    assert error_of(raw.call("hello", {"token": 5})) == "invalid_params.type"
    assert error_of(raw.call("hello", {"tokn": "x"})) == "invalid_params.unknown"
    assert raw.hello()["ok"]["principal"] == "unknown"


def test_unknown_verb(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    for verb in ("memory.teleport", "", "MEMORY.ADD", "memory_add", "hello.again"):
        message = raw.call(verb)
        assert error_of(message) == "unsupported.verb", verb
        assert message["id"] == raw.next_id
    assert serving(raw)


def test_the_documented_not_found_exchange_is_what_the_daemon_says(home: Home, connect: Any) -> None:
    """docs/protocol.md's example of an error, sent as written, gets exactly the reply it shows."""
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "protocol.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    request = next(line[2:] for line in lines if line.startswith("→ ") and '"m999"' in line)
    documented = json.loads(next(line[2:] for line in lines if line.startswith("← ") and "not_found.memory" in line))
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(request.encode() + b"\n")
    assert raw.reply() == documented
    assert documented["error"]["data"] == {}, "ids reveal nothing: not_found carries no data (docs/protocol.md)"


# garbage


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json\n", "invalid_params.protocol"),
        (b"{\n", "invalid_params.protocol"),
        (b"[1, 2, 3]\n", "invalid_params.protocol"),
        (b'"a string"\n', "invalid_params.protocol"),
        (b"42\n", "invalid_params.protocol"),
        (b"null\n", "invalid_params.protocol"),
        (b'{"id": 5}\n', "invalid_params.protocol"),
        (b'{"id": 6, "verb": 7}\n', "invalid_params.protocol"),
        (b'{"id": 7, "verb": null}\n', "invalid_params.protocol"),
        (b"\xff\xfe\xfd\n", "invalid_params.encoding"),
        (b'{"id": 8, "verb": "whoami\xc3"}\n', "invalid_params.encoding"),
        (b'{"id": 9, "verb": "whoami", "params": [1]}\n', "invalid_params.type"),
        (b'{"id": 10, "verb": "whoami", "params": "x"}\n', "invalid_params.type"),
    ],
)
def test_garbage_lines_get_an_error_and_the_connection_keeps_serving(
    home: Home, connect: Any, line: bytes, code: str
) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(line)
    assert error_of(raw.reply()) == code
    assert serving(raw)
    other = connect()
    assert other.hello()["ok"]["principal"] == "unknown"


def test_garbage_before_hello_then_hello_works(home: Home, connect: Any) -> None:
    raw = connect()
    raw.send(b"garbage\n\xff\n[]\n")
    assert [error_of(raw.reply()) for _ in range(3)] == [
        "invalid_params.protocol",
        "invalid_params.encoding",
        "invalid_params.protocol",
    ]
    assert raw.hello(owner_key(home))["ok"]["principal"] == "owner"


def test_blank_lines_do_not_disturb_the_stream(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(b"\n  \n\r\n")
    message = raw.call("whoami")  # call() asserts the next reply is this request's
    assert message["ok"]["principal"] == "owner"


GOOD_IDS = ["abc", "", 0, -1, 7, INT64 - 1, -INT64, "x" * 64, "\u00e9" * 32]
BAD_IDS = [b"1.5", b"1e3", b"NaN", b"Infinity", b"-Infinity", b"null", b"true", b"[1]", b'{"k": "v"}',
           str(INT64).encode(), b'"' + b"x" * 65 + b'"', b'"' + "\u00e9".encode() * 33 + b'"',
           b'"\\ud800"']  # fmt: skip


def test_integer_and_short_string_ids_are_echoed(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    for request_id in GOOD_IDS:
        raw.send({"id": request_id, "verb": "whoami", "params": {}})
        message = raw.reply()
        assert message["id"] == request_id
        assert message["ok"]["principal"] == "owner"
    raw.send({"id": "p", "verb": "whoami"})  # params may be omitted
    assert raw.reply() == {"id": "p", "ok": raw.call("whoami")["ok"]}


@pytest.mark.parametrize("request_id", BAD_IDS, ids=[i.decode("utf-8", "replace")[:12] for i in BAD_IDS])
def test_any_other_id_is_a_frame_error_with_a_null_id(home: Home, connect: Any, request_id: bytes) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(b'{"id": ' + request_id + b', "verb": "memory.add", "params": {"space": "user", "content": "x"}}\n')
    message = raw.reply()
    assert error_of(message) == "invalid_params.frame"
    assert message["id"] is None and message["error"]["data"]["param"] == "id"
    raw.send(b'{"verb": "memory.add", "params": {"space": "user", "content": "no id"}}\n')
    assert error_of(raw.reply()) == "invalid_params.frame"
    assert raw.call("store.status")["ok"]["memories"] == 0  # the connection stays open; nothing was run


def test_a_bad_id_before_hello_leaves_the_connection_unauthenticated(home: Home, connect: Any) -> None:
    raw = connect()
    raw.send(b'{"id": NaN, "verb": "hello", "params": {}}\n')
    assert error_of(raw.reply()) == "invalid_params.frame"
    assert raw.hello(owner_key(home))["ok"]["principal"] == "owner"


def test_replies_are_ascii_json_lines(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    text = 'line\u2028sep\u2029 é 😀 "quoted" back\\slash\ttab\r\nnewline'
    memory = raw.call("memory.add", {"space": "user", "content": text})["ok"]["id"]
    raw.send({"id": "get", "verb": "memory.get", "params": {"id": memory}})
    line = raw.line()
    assert all(32 <= b < 127 for b in line), "a reply line is printable ASCII"
    assert json.loads(line)["ok"]["content"] == text


@pytest.mark.parametrize(
    "line",
    [
        b'{"id": "s", "verb": "memory.add", "params": {"space": "user", "content": "a\\ud800b"}}\n',
        b'{"id": "s", "verb": "memory.add", "params": {"space": "user", "content": "\\udc00"}}\n',
        b'{"id": "s", "verb": "memory.add", "params": {"space": "user", "content": "x", "title": "\\ude00\\ud83d"}}\n',
        b'{"id": "s", "verb": "memory.add", "params": {"space": "user", "content": "caf\xe9"}}\n',
    ],
)
def test_lone_surrogates_and_bad_bytes_are_encoding_errors(home: Home, connect: Any, line: bytes) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(line)
    assert error_of(raw.reply()) == "invalid_params.encoding"
    assert raw.call("store.status")["ok"]["memories"] == 0
    raw.send(b'{"id": "pair", "verb": "memory.add", "params": {"space": "user", "content": "\\ud83d\\ude00"}}\n')
    assert raw.reply()["ok"]["changed"] is True  # a surrogate pair is one valid character
    assert raw.call("memory.get", {"id": "m1"})["ok"]["content"] == "\U0001f600"


# framing


def test_a_line_over_4_mib_is_refused_and_the_connection_closed(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    head = b'{"id": 1, "verb": "memory.add", "params": {"space": "user", "content": "'
    # The daemon may close before it has read it all; its reply is already buffered for us.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        raw.send(head + b"a" * (MAX_FRAME + 64) + b'"}}\n')
    assert error_of(raw.reply()) == "invalid_params.frame"
    assert raw.closed()
    fresh = connect()
    fresh.hello(owner_key(home))
    assert fresh.call("store.status")["ok"]["memories"] == 0
    assert home.cli("ping").code == 0


FRAME_SIZES = [(MAX_FRAME - 1, "invalid_params.range"), (MAX_FRAME, "invalid_params.range"),
               (MAX_FRAME + 1, "invalid_params.frame")]  # fmt: skip


@pytest.mark.parametrize(("size", "code"), FRAME_SIZES)
def test_frame_bound_is_exactly_4_mib_before_the_newline(home: Home, connect: Any, size: int, code: str) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    envelope = b'{"id": "big", "verb": "memory.search", "params": {"query": ""}}'
    line = envelope.replace(b'""', b'"' + b"q" * (size - len(envelope)) + b'"')
    assert len(line) == size
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        raw.send(line + b"\n")
    message = raw.reply()
    assert error_of(message) == code  # a line that fits fails on the query bound instead
    if code == "invalid_params.range":
        assert message["id"] == "big"
        assert serving(raw)
    else:
        assert raw.closed()


def test_a_request_split_across_writes_is_reassembled(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    data = json.dumps({"id": "split", "verb": "memory.add", "params": {"space": "user", "content": "é split"}})
    encoded = data.encode() + b"\n"
    for i in range(0, len(encoded), 7):
        raw.send(encoded[i : i + 7])
    assert raw.reply()["ok"]["changed"] is True


def test_connection_closed_mid_request_leaves_the_daemon_serving(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(b'{"id": 1, "verb": "memory.add", "params": {"space": "user", "content": "half')
    raw.close()
    fresh = connect()
    fresh.hello(owner_key(home))
    assert fresh.call("store.status")["ok"]["memories"] == 0


def test_half_frames_on_many_connections_write_nothing(home: Home, connect: Any) -> None:
    """Cut anywhere: before the id, inside a string, an escape or a surrogate pair, just before the newline."""
    line = json.dumps({"id": 1, "verb": "memory.add", "params": {"space": "user", "content": 'half "é" \ud83d\ude00'}})
    line = line.replace("\\u00e9", "\\u00e9")
    for cut in range(1, len(line), 3):
        raw = connect()
        raw.hello(owner_key(home))
        raw.send(line[:cut].encode())
        raw.close()
    fresh = connect()
    fresh.hello(owner_key(home))
    assert fresh.call("store.status")["ok"]["memories"] == 0
    assert home.cli("ping").code == 0


# nesting depth (docs/protocol.md)


def deep(levels: int, *, objects: bool = False) -> bytes:
    return (b'{"k":' * levels + b"1" + b"}" * levels) if objects else (b"[" * levels + b"1" + b"]" * levels)


def add_line(value: bytes, request_id: bytes = b"7", *, id_last: bool = False) -> bytes:
    params = b'{"space": "user", "content": "x", "provenance": ' + value + b"}"
    if id_last:
        return b'{"verb": "memory.add", "params": ' + params + b', "id": ' + request_id + b"}\n"
    return b'{"id": ' + request_id + b', "verb": "memory.add", "params": ' + params + b"}\n"


@pytest.mark.parametrize("levels", [33, 100, 999, 5000, 1_000_000])
@pytest.mark.parametrize("objects", [False, True])
def test_params_nested_deeper_than_32_levels_are_a_depth_error(home: Home, connect: Any, levels: int,
                                                               objects: bool) -> None:  # fmt: skip
    raw = connect()
    raw.hello(owner_key(home))
    if objects:
        levels = min(levels, MAX_FRAME // 7)  # `{"k":` takes 6 bytes a level: as deep as fits a frame
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        raw.send(add_line(deep(levels, objects=objects)))
    message = raw.reply()
    assert error_of(message) == "invalid_params.depth", message
    assert (message["id"], message["error"]["data"]["param"]) == (7, "provenance")
    assert raw.call("store.status")["ok"]["memories"] == 0  # the connection stays open
    raw.send(add_line(deep(1_000_000), id_last=True))  # the id after the deep part is never read
    message = raw.reply()
    assert (error_of(message), message["id"]) == ("invalid_params.depth", None)
    assert serving(raw) and home.cli("ping").code == 0


def test_32_levels_pass_the_depth_check(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    raw.send(add_line(deep(32)))
    assert error_of(raw.reply()) == "invalid_params.type"  # provenance must be an object; the depth was fine
    raw.send(add_line(b'{"kind": "cli", "host": ' + deep(31) + b"}"))
    assert error_of(raw.reply()) == "invalid_params.provenance"


def test_deep_ids_and_hello_params(home: Home, connect: Any) -> None:
    raw = connect()
    for line in (b'{"id": ' + deep(1_000_000) + b', "verb": "whoami"}\n', b'{"id": ' + deep(40) + b', "verb": "x"}\n'):
        raw.send(line)
        message = raw.reply()
        assert (error_of(message), message["id"]) == ("invalid_params.frame", None)
    raw.send(b'{"id": 3, "verb": "hello", "params": {"token": ' + deep(50) + b"}}\n")
    message = raw.reply()
    assert (error_of(message), message["id"], message["error"]["data"]["param"]) == ("invalid_params.depth", 3, "token")
    assert raw.hello(owner_key(home))["ok"]["principal"] == "owner"


# random bytes and idle connections


def test_random_bytes_never_take_the_daemon_down(home: Home, connect: Any) -> None:
    rng = random.Random(8)
    raw = connect()
    raw.hello(owner_key(home))
    for _ in range(300):
        garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))).replace(b"\n", b" ")
        raw.send(garbage + b'\n{"id": "after", "verb": "store.status"}\n')
        while (message := raw.reply())["id"] != "after":  # a blank line gets no reply; anything else an error
            assert message["id"] is None and error_of(message).startswith("invalid_params."), message
        assert message["ok"]["memories"] == 0
    other = connect()
    other.send(bytes(rng.randrange(256) for _ in range(1 << 16)))  # no newline, then gone: a half frame
    other.close()
    assert serving(raw) and home.cli("ping").code == 0


def test_3000_idle_connections(home: Home, connect: Any) -> None:
    idle = [connect() for _ in range(3000)]
    half = idle[:10]
    for raw in half:
        raw.send(b'{"id": 1, "verb": "hel')
    fresh = connect()
    assert fresh.hello(owner_key(home))["ok"]["principal"] == "owner"
    assert fresh.call("memory.add", {"space": "user", "content": "while 3000 wait"})["ok"]["changed"] is True
    assert home.ok("store", "status")["memories"] == 1
    for raw in idle:
        raw.close()
    assert serving(fresh)


# pipelining


def test_fifty_pipelined_requests_in_one_write(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    requests = [{"id": f"r{i}", "verb": "memory.add", "params": {"space": "user", "content": f"pipelined {i}"}}
                for i in range(50)]  # fmt: skip
    raw.send(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    replies = {m["id"]: m for m in (raw.reply() for _ in range(50))}
    assert set(replies) == {f"r{i}" for i in range(50)}
    assert all(m["ok"]["changed"] is True for m in replies.values())
    memory_ids = {m["ok"]["id"] for m in replies.values()}
    assert len(memory_ids) == 50
    for i in range(50):
        content = raw.call("memory.get", {"id": replies[f"r{i}"]["ok"]["id"]})["ok"]["content"]
        assert content == f"pipelined {i}"
    assert raw.call("store.status")["ok"]["memories"] == 50


def test_pipelined_mix_of_good_and_bad_requests(home: Home, connect: Any) -> None:
    raw = connect()
    raw.hello(owner_key(home))
    batch = [
        json.dumps({"id": 1, "verb": "memory.add", "params": {"space": "user", "content": "one"}}).encode(),
        b"garbage",
        json.dumps({"id": 3, "verb": "memory.nope", "params": {}}).encode(),
        json.dumps({"id": 4, "verb": "memory.add", "params": {"space": "BAD", "content": "x"}}).encode(),
        json.dumps({"id": 5, "verb": "memory.get", "params": {"id": "m1"}}).encode(),
    ]
    raw.send(b"\n".join(batch) + b"\n")
    replies = [raw.reply() for _ in batch]
    by_id = {m["id"]: m for m in replies if m["id"] is not None}
    assert by_id[1]["ok"]["id"] == "m1"
    assert error_of(by_id[3]) == "unsupported.verb"
    assert error_of(by_id[4]) == "invalid_params.space"
    assert by_id[5]["ok"]["content"] == "one"
    assert [error_of(m) for m in replies if m["id"] is None] == ["invalid_params.protocol"]


def test_many_connections_at_once(home: Home, connect: Any) -> None:
    raws = [connect() for _ in range(20)]
    for raw in raws:
        raw.send({"id": "h", "verb": "hello", "params": {"token": owner_key(home)}})
    for i, raw in enumerate(raws):
        assert raw.reply()["ok"]["principal"] == "owner"
        raw.send({"id": "a", "verb": "memory.add", "params": {"space": "user", "content": f"conn {i}"}})
    assert {raw.reply()["ok"]["id"] for raw in raws} == {f"m{i}" for i in range(1, 21)}


# tokens


@pytest.mark.parametrize(
    "token",
    [
        "garbage",
        "hm1.owner.",
        "hm1.owner.short",
        "hm1.owner." + WRONG_SECRET,
        "hm1.owner." + WRONG_SECRET + "x",
        "hm2.owner." + WRONG_SECRET,
        "hm1.g1." + WRONG_SECRET,
        "hm1.g99." + WRONG_SECRET,
        "hm1.g0." + WRONG_SECRET,
        "@owner",
        " ",
    ],
)
def test_bad_token_is_denied_with_no_fallback_to_unknown(home: Home, connect: Any, token: str) -> None:
    raw = connect()
    message = raw.hello(token)
    assert error_of(message) == "denied.token"
    assert message["error"]["data"]["reason"] == "invalid"
    assert WRONG_SECRET not in json.dumps(message)
    assert error_of(raw.call("whoami")) == "invalid_params.protocol"
    assert error_of(raw.call("memory.search", {"query": "x"})) == "invalid_params.protocol"


def test_owner_key_with_one_character_changed_is_denied(home: Home, connect: Any) -> None:
    key = owner_key(home)
    forged = key[:-1] + ("A" if key[-1] != "A" else "B")
    message = connect().hello(forged)
    assert error_of(message) == "denied.token"
    assert message["error"]["data"]["reason"] == "invalid"
    assert connect().hello(key)["ok"]["principal"] == "owner"


def test_bad_token_through_the_cli_writes_nothing(home: Home, connect: Any) -> None:
    result = home.cli("memory", "add", "--space", "user", "--content", "x", "--json",
                      token="hm1.owner." + WRONG_SECRET)  # fmt: skip
    assert result.code == 4
    assert result.json["error"]["code"] == "denied.token"
    assert result.json["error"]["data"]["reason"] == "invalid"
    assert home.ok("store", "status")["memories"] == 0
    read = home.cli("memory", "search", "--query", "x", "--json", token="nonsense")
    assert (read.code, read.json["error"]["code"]) == (4, "denied.token")
