"""Fuzzing (docs/protocol.md, docs/hooks.md, docs/security.md): generated frames on the real socket, params, hook stdin.

Every frame gets well-formed replies (one JSON object per line, `ok` or a SPEC error, never `failed.internal`, never a
traceback), the connection keeps serving, and after each batch the daemon answers and the store is unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Home, isolated_home
from faults import SOAK, figure, soak_only
from hivemem.cli.params import convert
from hivemem.errors import HivememError
from hivemem.manifest import VERBS
from hivemem.params import validate
from test_hooks import HOOK_INPUT
from test_wire import Raw, owner_key

pytestmark = pytest.mark.fault

EXAMPLES = {"frames": 2000, "requests": 1200, "params": 1000, "hooks": 1000}  # 5,200 in CI
SCALE = 20 if SOAK else 1
CODE = re.compile(r"^[a-z_]+\.[a-z_]+$")
UNSAFE = {"daemon.stop", "events.follow"}  # stops the daemon / turns the connection into a stream
READ_VERBS = sorted(v.name for v in VERBS if not v.writes and v.name not in UNSAFE)
WRITE_VERBS = sorted(v.name for v in VERBS if v.writes)
SEEN = {"frames": 0, "replies": 0, "errors": 0}


class Fuzzed:
    """The module's daemon, one owner connection to it, and the store's fingerprint before any fuzzing."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.raw = self._open()
        self.marks = 0
        self.before = self.fingerprint(self.raw)

    def _open(self) -> Raw:
        raw = Raw(self.home.paths.socket)
        raw.hello(owner_key(self.home))
        return raw

    def fingerprint(self, raw: Raw) -> Any:
        """Everything a stray write would change: counts, every memory and revision, the event log."""
        status = raw.call("store.status")["ok"]
        memories = raw.call("memory.list", {})["ok"]["memories"]
        events = raw.call("events.list", {})["ok"]
        return {k: v for k, v in status.items() if "size" not in k and "bytes" not in k}, memories, events

    def exchange(self, frame: bytes) -> None:
        """Send one frame and a marker request; check every reply up to the marker's."""
        SEEN["frames"] += 1
        self.marks += 1
        mark = f"after-{self.marks}"
        self.raw.send(frame + b'\n{"id":"%s","verb":"whoami","params":{}}\n' % mark.encode())
        while True:
            line = self.raw.line()
            assert b"Traceback" not in line, line[:500]
            message = json.loads(line)
            assert isinstance(message, dict) and "id" in message, line[:500]
            assert len(message) == 2 and ("ok" in message) != ("error" in message), line[:500]
            if message["id"] == mark and "ok" in message:
                return
            SEEN["replies"] += 1
            if "error" in message:
                SEEN["errors"] += 1
                error = message["error"]
                assert set(error) == {"code", "message", "data"}, error
                assert CODE.match(error["code"]) and error["code"] != "failed.internal", (frame[:300], error)
            else:  # a read verb that happened to get valid params
                assert message["id"] is not None


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    with isolated_home() as home:
        home.ok("memory", "add", "--space", "user", "--content", "the store must not change under fuzzing")
        home.ok("memory", "add", "--space", "team/x", "--content", "a second memory, in a team space")
        state = Fuzzed(home)
        yield state
        state.raw.close()
        figure("fuzz on the socket", **SEEN)


@pytest.fixture
def batch(fuzzed: Fuzzed) -> Iterator[Fuzzed]:
    """After each batch (one hypothesis test): the daemon answers a fresh connection and the store is unchanged."""
    yield fuzzed
    fresh = Raw(fuzzed.home.paths.socket)
    try:
        fresh.hello(owner_key(fuzzed.home))
        assert fresh.call("whoami")["ok"]["principal"] == "owner"
        assert fuzzed.fingerprint(fresh) == fuzzed.before
    finally:
        fresh.close()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=16,
)
IDS = (
    st.integers() | st.integers(min_value=-(2**70), max_value=2**70) | st.text(max_size=80) | st.floats()
    | st.none() | st.booleans() | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), JSON, max_size=2)
)  # fmt: skip


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """A request-shaped object: any id, a real or made-up verb, any params (never a valid write)."""
    verb = draw(st.sampled_from([*READ_VERBS, *WRITE_VERBS, "hello"]) | st.text(max_size=30))
    params: Any = draw(JSON | st.dictionaries(st.text(max_size=12), JSON, max_size=5) | st.integers(0, 60).map(nested))
    if verb in WRITE_VERBS and (params is None or isinstance(params, dict)):  # null params count as {}
        params = {**(params or {}), "zz_not_a_param": 1}  # a write never passes validation: the store cannot change
    message: dict[str, Any] = {"verb": verb, "params": params}
    if draw(st.booleans()):
        message["id"] = draw(IDS)
    if draw(st.booleans()):
        message[draw(st.text(max_size=8))] = draw(JSON)
    text = json.dumps(message, allow_nan=True, ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass")


FRAMES = (
    st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" "))
    | JSON.map(lambda v: json.dumps(v, allow_nan=True).encode("utf-8", "surrogatepass"))
    | st.text(max_size=200).map(lambda t: t.replace("\n", " ").encode("utf-8", "surrogatepass"))
    | st.tuples(requests(), st.sampled_from([b"", b"\r", b" ", b"\x00", b"\xff", b"{}", b'{"id":1}']))
    .map(lambda t: t[0] + t[1])
    | st.tuples(requests(), requests()).map(lambda t: t[0] + b" " + t[1])  # two objects on one line
)  # fmt: skip


@settings(max_examples=EXAMPLES["frames"] * SCALE, deadline=None, derandomize=not SOAK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(frame=FRAMES)
def test_any_frame_gets_well_formed_replies(batch: Fuzzed, frame: bytes) -> None:
    batch.exchange(frame)


@settings(max_examples=EXAMPLES["requests"] * SCALE, deadline=None, derandomize=not SOAK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(frame=requests())
def test_any_request_gets_one_reply_or_a_frame_error(batch: Fuzzed, frame: bytes) -> None:
    batch.exchange(frame)


PARAM_TEXT = st.text(max_size=60) | st.sampled_from(["-1", "1e309", "nan", "[", "[1,", "@project", "@user,x", "true"])


@settings(max_examples=EXAMPLES["params"] * SCALE, deadline=None, derandomize=not SOAK)
@given(verb=st.sampled_from(VERBS), data=st.data())
def test_cli_and_wire_params_raise_only_hivemem_errors(verb: Any, data: st.DataObject) -> None:
    """The CLI's flag conversion and the daemon's validation take anything and answer only with SPEC errors."""
    params: dict[str, Any] = {}
    for p in verb.params:
        if p.type == "string" and data.draw(st.booleans()):
            continue  # `-` reads stdin: not here
        if data.draw(st.booleans()):
            try:
                params[p.name] = convert(p, data.draw(PARAM_TEXT))
            except HivememError as exc:
                assert CODE.match(exc.code) and exc.code.startswith("invalid_params."), exc.code
    if data.draw(st.booleans()):
        params[data.draw(st.text(max_size=10))] = data.draw(JSON)
    try:
        validate(verb, params, 65536)
    except HivememError as exc:
        assert CODE.match(exc.code) and exc.code != "failed.internal", exc.code


@settings(max_examples=EXAMPLES["hooks"] * SCALE, deadline=None, derandomize=not SOAK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(event=st.sampled_from(["session-start", "prompt-submit"]), data=HOOK_INPUT)
def test_any_hook_stdin_answers_nothing_or_one_payload(batch: Fuzzed, event: str, data: bytes) -> None:
    """The hook, in this process against the module's daemon: never raises, prints nothing or one JSON payload."""
    from hivemem.hooks.main import run

    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
        os.close(write_end)
        write_end = -1
        out = run([event], read_end)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if out:
        payload = json.loads(out)
        assert isinstance(payload, dict) and "hookSpecificOutput" in payload, out[:300]


@soak_only()
def test_atheris_on_the_frame_decoder_and_param_validation() -> None:
    """Coverage-guided: atheris mutates frames for ten minutes; any exception but a SPEC error is a crash."""
    if importlib.util.find_spec("atheris") is None:  # the soak tier asked for it: a missing atheris fails the run
        pytest.fail(
            "HIVEMEM_SOAK=1 runs the atheris fuzz target, and atheris is not installed: pip install -e '.[fuzz]'"
        )
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_frames.py")
    seconds = os.environ.get("HIVEMEM_FUZZ_SECONDS", "600")
    proc = subprocess.run([sys.executable, target, f"-max_total_time={seconds}"], capture_output=True, text=True,
                          timeout=int(seconds) + 120, check=False)  # fmt: skip
    done = [line for line in proc.stderr.splitlines() if "DONE" in line]
    figure("atheris", seconds=int(seconds), last=done[-1] if done else "")
    assert proc.returncode == 0, proc.stderr[-3000:]
