"""Client.call(verb, **params): DaemonClient (socket, on-demand start) and LocalClient (in-process)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from hivemem import __version__, paths, peer
from hivemem.config import Config, load
from hivemem.errors import Failed, HivememError, InvalidParams, Unavailable, from_wire
from hivemem.protocol import MAX_FRAME, encode

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any

    Progress = Callable[[str, int, int], None]  # (stage, done, total)


class DaemonClient:
    """One connection to the store's daemon, started on demand, authenticated by `hello`."""

    def __init__(self, config: Config | None = None, token: str | None = None, *, start: bool = True,
                 name: str = "cli", budget: float | None = None,
                 starting: Callable[[str | None], None] | None = None) -> None:  # fmt: skip
        self.config = config or load()
        self.paths = paths.resolve(self.config["store.path"], self.config.path, bool(self.config["store.url"]))
        self.token = paths.token() if token is None else token
        self.start = start and self.config["daemon.startup"] == "on-demand"
        self.name = name
        self.starting = starting  # hears a starting daemon's progress lines (a migration), then None when ready
        self.warnings: list[str] = []
        self.hello: dict[str, Any] = {}
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._next_id = 0
        # With a budget (hooks), start-up, connect and every reply share one deadline.
        self.deadline = None if budget is None else time.monotonic() + budget

    def connect(self) -> DaemonClient:
        """Reach the daemon (starting it if allowed) and say hello."""
        if self._sock is not None:
            return self
        sock = try_connect(self.paths.socket)
        if sock is None:
            if not self.start:
                raise not_running()
            budget = self._left(self.config["daemon.startup_timeout_ms"] / 1000)
            sock = spawn_and_connect(self.paths, budget, patient=self.deadline is None, heard=self.starting)
        self._sock = sock
        self.hello = self.request("hello", {"token": self._credential(), "client": f"{self.name}/{__version__}"})
        if self.hello.get("version") != __version__:
            self.warnings.append(f"daemon runs hivemem {self.hello.get('version')}, this is {__version__}; "
                                 "`hivemem stop` and the next call start the new version")  # fmt: skip
        return self

    def _credential(self) -> str:
        if self.token != "@owner":
            return self.token
        try:  # O_NOFOLLOW: a symlinked key is refused here as in the daemon (docs/schema.md)
            fd = os.open(self.paths.owner_key, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, encoding="ascii") as f:
                return f.read().strip()
        except OSError as exc:
            raise Failed("owner_key", f"cannot read the owner key {self.paths.owner_key}: {exc.strerror}",
                         fix="run as the user who owns the store") from None  # fmt: skip

    def call(self, verb: str, **params: object) -> dict[str, Any]:
        """Send one request and return its `ok` object, or raise its error."""
        self.connect()
        return self.request(verb, params)

    def _left(self, wanted: float | None = None) -> float:
        """Seconds this client may still wait (at most `wanted`); unavailable.timeout once the budget is spent."""
        if self.deadline is None:
            return wanted if wanted is not None else 0.0
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Unavailable("timeout", "no answer from the daemon within the time budget")
        return min(left, wanted) if wanted is not None else left

    def request(self, verb: str, params: Mapping[str, object], progress: Progress | None = None) -> dict[str, Any]:
        """One request and its `ok` object, or its error raised. With `progress`, the request asks the daemon
        for progress frames (D114), and each one's (stage, done, total) is passed to it until the reply comes."""
        if self.deadline is not None and self._sock is not None:
            self._sock.settimeout(self._left())
        self._next_id += 1
        request: dict[str, object] = {"id": self._next_id, "verb": verb, "params": params}
        if progress is not None:
            request["progress"] = True
        self._send_line(frame(request))
        message = self.receive()
        while "progress" in message and not {"ok", "error"} & message.keys():
            if progress is not None:
                report = message["progress"]
                progress(str(report.get("stage", "")), int(report.get("done", 0)), int(report.get("total", 0)))
            message = self.receive()
        if "error" in message:
            raise from_wire(message["error"])
        result: dict[str, Any] = message["ok"]
        return result

    def stream(self, verb: str, params: Mapping[str, object], key: str,
               started: Callable[[dict[str, Any]], None] | None = None) -> Iterator[dict[str, Any]]:  # fmt: skip
        """Send a request of a verb with the `stream` trait (`key` is the trait: `event` for events.follow) and
        yield each `{key: object}` that follows; an `{"error": ...}` line raises it. The daemon closes the
        connection when a stream ends, which `receive` reports as `unavailable.daemon_gone`. `started` gets the
        daemon's answer once the stream is open, before the first item."""
        self.connect()
        accepted = self.request(verb, params)
        if started is not None:
            started(accepted)
        while True:
            message = self.receive()
            if key in message:
                yield message[key]
            elif "error" in message:
                raise from_wire(message["error"])

    def send(self, message: Mapping[str, object]) -> None:
        self._send_line(encode(message))

    def _send_line(self, line: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(line)
        except OSError as exc:
            raise Unavailable("daemon_gone", f"lost the daemon: {exc.strerror}") from None

    def receive(self) -> dict[str, Any]:
        """The next line from the daemon, parsed."""
        assert self._sock is not None
        while b"\n" not in self._buffer:
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                raise Unavailable("timeout", "no answer from the daemon within the time budget") from None
            except OSError as exc:
                raise Unavailable("daemon_gone", f"lost the daemon: {exc.strerror}") from None
            if not chunk:
                raise Unavailable("daemon_gone", "the daemon closed the connection")
            self._buffer += chunk
            if len(self._buffer) > MAX_FRAME + 1:
                raise Failed("protocol", "reply larger than a frame")
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def alive(self) -> bool:
        """Whether the connection still stands; between requests the daemon sends nothing, so readable means closed."""
        if self._sock is None:
            return False
        import select

        return not select.select([self._sock], [], [], 0)[0]

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def frame(request: Mapping[str, object]) -> bytes:
    """The request's line, refused here as invalid_params.frame when it is over a frame (docs/protocol.md): the
    daemon would close the connection on it, which a caller would see as a lost daemon. The one check for the
    CLI and the MCP adapter, which both send through `DaemonClient.request`."""
    line = encode(request)
    if len(line) > MAX_FRAME + 1:  # the newline ends the frame and is not counted in it
        raise InvalidParams("frame", f"a request is limited to {MAX_FRAME} bytes", max_bytes=MAX_FRAME)
    return line


def not_running() -> Unavailable:
    return Unavailable("not_running", "the hivemem daemon is not running", fix="hivemem serve")


def try_connect(path: str) -> socket.socket | None:
    """A connection to a daemon of this user, or None if nothing listens; refuses a socket it cannot trust."""
    if not paths.check_socket_dir(os.path.dirname(path)):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    try:  # before a byte, let alone a token, is sent (docs/schema.md)
        peer.check(sock, path)
    except HivememError:
        sock.close()
        raise
    return sock


def spawn_and_connect(where: paths.Paths, budget: float, *, patient: bool = False,
                      heard: Callable[[str | None], None] | None = None) -> socket.socket:  # fmt: skip
    """Start a daemon (setsid, stdio to /dev/null, cwd /, no token) and wait for its readiness; a `patient`
    client (one without an overall deadline) waits on while the daemon reports migration progress, and
    `heard` gets each progress line, then None once the daemon has said anything else."""
    deadline = time.monotonic() + budget
    import subprocess

    read_end, write_end = os.pipe()
    try:
        starter = subprocess.Popen(
            [sys.executable, "-m", "hivemem", "serve", "--on-demand", "--ready-fd", str(write_end)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", env=paths.daemon_env(), pass_fds=(write_end,), start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(write_end)
    try:  # the daemon double-forks: this process exits as soon as the interpreter has started
        starter.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        starter.kill()
        starter.wait()
    try:
        message = _read_readiness(read_end, deadline, patient, heard)
    finally:
        os.close(read_end)
    if message != "ready":
        error = from_wire(json.loads(message)) if message else _exited(where)
        if error.code != "conflict.store_locked":
            raise error
    return _connect_until(where.socket, deadline)


def _exited(where: paths.Paths) -> Failed:
    log = os.path.join(where.logs, "daemon.log")
    return Failed("daemon_start", "the daemon exited before it was ready, without saying why", cause="other",
                  path=log, fix=f"see {log}, or run `hivemem serve` to see the error")  # fmt: skip


def _read_readiness(fd: int, deadline: float, patient: bool, heard: Callable[[str | None], None] | None) -> str:
    """The daemon's `ready` or error line; `progress …` lines (a migration at work) restart a patient wait and
    go to `heard`, which gets None when they are over."""
    import select

    budget = deadline - time.monotonic()
    data = b""
    spoke = False
    while True:
        line, found, rest = data.partition(b"\n")
        if found and not line.startswith(b"progress "):
            if spoke and heard is not None:
                heard(None)
            return line.decode("utf-8", "replace").strip()
        if found:
            data, deadline = rest, time.monotonic() + budget if patient else deadline
            if heard is not None:
                heard(line[len(b"progress ") :].decode("utf-8", "replace").strip())
                spoke = True
            continue
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise Unavailable("daemon_start", "the daemon did not report ready in time", fix="hivemem doctor")
        chunk = os.read(fd, 65536)
        if not chunk:
            if spoke and heard is not None:
                heard(None)
            return data.decode("utf-8", "replace").strip()
        data += chunk


def _connect_until(path: str, deadline: float) -> socket.socket:
    """Another daemon won the start race: wait (bounded) until its socket accepts."""
    while True:
        sock = try_connect(path)
        if sock is not None:
            return sock
        if time.monotonic() > deadline:
            raise Unavailable("daemon_start", "no daemon answered in time", fix="hivemem doctor")
        time.sleep(0.01)


class LocalClient:
    """The same calls, in-process, on a store this process opens itself (tools and benchmarks)."""

    def __init__(self, store_path: str) -> None:
        from hivemem.auth import owner
        from hivemem.store import open_store

        self.store = open_store(store_path)
        self.principal = owner()

    def call(self, verb: str, **params: object) -> dict[str, Any]:
        from hivemem import ops

        return ops.dispatch(self.store, self.principal, verb, params)

    def close(self) -> None:
        self.store.close()


def wait_stopped(client: DaemonClient, budget: float = 5.0) -> bool:
    """After daemon.stop: wait (bounded) until the socket no longer answers."""
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        sock = try_connect(client.paths.socket)
        if sock is None:
            return True
        sock.close()
        time.sleep(0.02)
    return False
