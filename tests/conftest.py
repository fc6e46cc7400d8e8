"""Real stores, a real daemon on a real socket, and the real CLI, in a temporary XDG home."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hivemem import paths
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
# The backends the behaviour tests of BOTH run against (docs/team.md): a fresh PostgreSQL database per test on
# the server at HIVEMEM_TEST_PG. Where that server does not answer, those tests skip, or fail when
# HIVEMEM_REQUIRE_POSTGRES=1 (as CI sets it).
BACKENDS = tuple(b for b in os.environ.get("HIVEMEM_TEST_BACKENDS", "sqlite,postgresql").split(",") if b)
PG_SERVER = os.environ.get("HIVEMEM_TEST_PG", "postgresql://127.0.0.1:5432/test")
BOTH = frozenset({
    "test_cli_verbs", "test_cli_everyday", "test_clients", "test_events", "test_governance", "test_grants",
    "test_mcp", "test_operations", "test_recall", "test_search", "test_search_cjk", "test_search_window",
    "test_sessions", "test_transactions", "test_versions",
})  # fmt: skip
FIGURES: list[str] = []  # lines the fault suite measured (tests/faults.py figure()), printed at the end of the run


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@dataclass
class Result:
    """A finished CLI run."""

    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


def pytest_generate_tests(metafunc: Any) -> None:
    """Every test of a BOTH module that uses a home runs once per backend (unless marked sqlite_only)."""
    name = metafunc.module.__name__.rsplit(".", 1)[-1]
    if "backend" not in metafunc.fixturenames or name not in BOTH:
        return
    if metafunc.definition.get_closest_marker("sqlite_only"):
        return
    metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: Any) -> str:
    """The backend of this test's home: sqlite unless the test is parametrized over both."""
    return str(getattr(request, "param", "sqlite"))


def pg_superuser() -> Any:
    """An autocommit connection to the test server as its superuser (a psycopg connection); skips where no server
    answers, or fails under HIVEMEM_REQUIRE_POSTGRES=1."""
    import psycopg

    try:
        return psycopg.connect(PG_SERVER, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        if os.environ.get("HIVEMEM_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"no PostgreSQL server answers at {PG_SERVER}: {exc}")
        pytest.skip(f"no PostgreSQL server at {PG_SERVER} (set HIVEMEM_TEST_BACKENDS=sqlite to run SQLite only)")


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the test server, dropped afterwards; yields its URL."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    name = f"hm_{uuid.uuid4().hex[:16]}"
    with pg_superuser() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(urlsplit(PG_SERVER)._replace(path="/" + name))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


CLIENTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "node_modules", ".bin")


def node_client(name: str) -> str:
    """The path of a real client's command (`claude`, `codex`, `mcp-inspector`) as pinned in tests/clients/package.json
    and installed by `npm install --prefix tests/clients`; skips where it is not installed, or fails under
    HIVEMEM_REQUIRE_NODE_CLIENTS=1 (as CI sets it)."""
    path = os.path.join(CLIENTS_DIR, name)
    if not os.access(path, os.X_OK):
        hint = f"{name} is not installed (npm install --prefix tests/clients)"
        if os.environ.get("HIVEMEM_REQUIRE_NODE_CLIENTS") == "1":
            pytest.fail("HIVEMEM_REQUIRE_NODE_CLIENTS=1 but " + hint)
        pytest.skip(hint)
    return path


class Home:
    """An isolated hivemem home: its own store, config, state and runtime directories; with `store_url`, its
    store is that PostgreSQL database (every config written keeps the URL)."""

    def __init__(self, base: str, store_url: str = "") -> None:
        self.base = base
        self.store_url = store_url
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HIVEMEM_")}
        for var, sub in zip(XDG, ("data", "config", "state", "run"), strict=True):
            self.env[var] = os.path.join(base, sub)

    @property
    def paths(self) -> paths.Paths:
        """This home's paths, for the store its config names (`store.path`) or the default one."""
        config = os.path.join(self.env["XDG_CONFIG_HOME"], "hivemem", "config.toml")
        with self.environment():
            return paths.resolve(_configured_store(config), config, bool(self.store_url))

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """This home's XDG directories in the test process's environment for a while (a second home, on a
        second "machine", is not the one isolated_home points the process at)."""
        saved = {var: os.environ.get(var) for var in XDG}
        os.environ.update({var: self.env[var] for var in XDG})
        try:
            yield
        finally:
            for var, value in saved.items():
                if value is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = value

    def config(self, text: str) -> None:
        """Write config.toml (0600)."""
        directory = os.path.join(self.env["XDG_CONFIG_HOME"], "hivemem")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        path = os.path.join(directory, "config.toml")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(self._with_url(text))

    def _with_url(self, text: str) -> str:
        if not self.store_url or re.search(r"^\s*(store\.)?url\s*=", text, re.M):
            return text
        line = f"url = {json.dumps(self.store_url)}"
        if "[store]" in text:
            return text.replace("[store]", "[store]\n" + line, 1)
        return f"store.{line}\n{text}"

    def cli(self, *args: str, token: str | None = "@owner", stdin: bytes | str | None = None,
            cwd: str | None = None, timeout: float = 60) -> Result:  # fmt: skip
        """Run `hivemem ARGS` as a subprocess; token None means no HIVEMEM_TOKEN (unknown)."""
        env = dict(self.env)
        if token is not None:
            env["HIVEMEM_TOKEN"] = token
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run(
            [sys.executable, "-m", "hivemem", *args], input=data, capture_output=True, env=env,
            cwd=cwd or self.base, timeout=timeout, check=False,
        )  # fmt: skip
        return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))

    def ok(self, *args: str, **kw: Any) -> Any:
        """Run a `--json` command that must succeed; return its parsed result."""
        result = self.cli(*args, "--json", **kw)
        assert result.code == 0, (args, result)
        return result.json

    def client(self, token: str = "@owner", *, start: bool = True) -> DaemonClient:
        """An in-process client to this home's daemon."""
        from hivemem.config import Config, load

        try:
            config = load(self.paths.config)
        except HivememError:
            config = Config(path=self.paths.config)
        return DaemonClient(config, token=token, start=start)

    def daemon_log(self) -> str:
        """The text of logs/daemon.log ("" before the first daemon)."""
        try:
            with open(os.path.join(self.paths.logs, "daemon.log"), encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def daemon_pid(self) -> int | None:
        """The pid of the daemon holding this home's socket lock, if alive."""
        with self.environment():
            lock = self.paths.socket_lock
        try:
            with open(lock) as f:
                pid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            return None
        if pid <= 0:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid if _is_daemon(pid) else None

    def stop_daemon(self) -> None:
        pid = self.daemon_pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: self.daemon_pid() is None, 10)
        if self.daemon_pid() is not None:
            os.kill(pid, signal.SIGKILL)


def _configured_store(config: str) -> str:
    from hivemem.config import load

    try:
        return str(load(config)["store.path"])
    except HivememError:  # a test that writes a bad config on purpose still gets the default paths
        return ""


def _is_daemon(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"serve" in f.read()
    except OSError:
        return False


def wait_for(condition: Any, timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll `condition` until it is true or `timeout` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


# What a citation of a SPEC section looks like in user-facing text (the SPEC is not shipped): "section 11", "§ 5"
# or a section number such as 9.1 or 11.3. A number that is part of a longer dotted one (0.1.0, 127.0.0.1), has a
# second digit after the dot (0.005, 3.12), starts with 0 (0.7) or ends in .0 (1.0) is a version or a decimal;
# any other decimal (2.5) reads as a section number, so user-facing text writes it another way (2500 ms).
SPEC_CITATION = re.compile(r"(?:\bsections?|§)\s*\d|(?<![\w.])[1-9]\d?\.[1-9](?!\.?\d)", re.IGNORECASE)


def spec_citations(text: str) -> list[str]:
    """Every mention of the SPEC or of one of its sections in `text`."""
    return re.findall("SPEC", text) + [m.group() for m in SPEC_CITATION.finditer(text)]


@contextlib.contextmanager
def isolated_home(backend: str = "sqlite") -> Iterator[Home]:
    """A fresh hivemem home that the test process's environment points at; its daemon is stopped after. With
    backend postgresql, its store is a fresh database of its own."""
    if backend == "postgresql":
        with pg_database() as url, isolated_home() as h:
            h.store_url = url
            h.config("")
            yield h
        return
    h = Home(tempfile.mkdtemp(prefix="hm-", dir="/tmp"))
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("HIVEMEM_")]:
            mp.delenv(key)
        for var in XDG:
            mp.setenv(var, h.env[var])
        try:
            yield h
        finally:
            h.stop_daemon()
            shutil.rmtree(h.base, ignore_errors=True)


@pytest.fixture
def home(backend: str) -> Iterator[Home]:
    """A fresh hivemem home for one test, on the backend of the test's parameter (sqlite by default)."""
    with isolated_home(backend) as h:
        yield h


@contextlib.asynccontextmanager
async def mcp_session(home: Home, token: str | None = "@owner", cwd: str | None = None,
                      tools: str = "all") -> AsyncIterator[Any]:  # fmt: skip
    """A real MCP client session (initialized) with a `hivemem mcp --tools TOOLS` process of its own (every tool
    unless told; "" for the configured set); token None: unknown."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = dict(home.env)
    if token is not None:
        env["HIVEMEM_TOKEN"] = token
    argv = ["-m", "hivemem", "mcp", *(["--tools", tools] if tools else [])]
    params = StdioServerParameters(command=sys.executable, args=argv, env=env, cwd=cwd or home.base)
    with open(os.path.join(home.base, "mcp-stderr.log"), "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def fails(home: Home, *args: str, code: str, exit_code: int, token: str | None = "@owner") -> dict[str, Any]:
    """Run a --json command that must fail with `code`; return the error object."""
    result = home.cli(*args, "--json", token=token)
    assert result.code == exit_code, result
    error = result.json["error"]
    assert error["code"] == code, error
    assert set(error) == {"code", "message", "data"}
    return dict(error)


def raises(client: DaemonClient, verb: str, **params: Any) -> HivememError:
    """Call `verb`, which must fail; return its error."""
    with pytest.raises(HivememError) as caught:
        client.call(verb, **params)
    return caught.value


def client_token(owner: DaemonClient, name: str, grants: list[tuple[str, str]]) -> str:
    """Create a client with (right, scope) grants through an owner connection; return its token."""
    token = owner.call("client.add", name=name, grants=[{"right": r, "scope": s} for r, s in grants])["token"]
    assert isinstance(token, str)
    return token


class Clients:
    """In-process connections by token, closed at the end of the test."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.open: dict[str, DaemonClient] = {}

    def __call__(self, token: str) -> DaemonClient:
        if token not in self.open:
            self.open[token] = self.home.client(token)
        return self.open[token]

    def close(self) -> None:
        for client in self.open.values():
            client.close()


@pytest.fixture
def owner(home: Home) -> Iterator[DaemonClient]:
    """An owner connection; the daemon is started by the CLI first."""
    home.ok("whoami")
    client = home.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def clients(home: Home, owner: DaemonClient) -> Iterator[Clients]:
    made = Clients(home)
    try:
        yield made
    finally:
        made.close()


def on_a_terminal(home: Home, *args: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (stdout a pipe): (exit code, stdout, what the terminal got)."""
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    with tempfile.TemporaryFile() as stdout:  # not a pipe: a large result must not wait for this reader
        proc = subprocess.Popen([sys.executable, "-m", "hivemem", *args], stdout=stdout, stderr=follower,
                                env=env, cwd=home.base)  # fmt: skip
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen += chunk
        proc.wait(timeout=120)
        os.close(leader)
        stdout.seek(0)
        out = stdout.read()
    return proc.returncode, out.decode(), seen.decode("utf-8", "replace")
