"""The harness plugins, validated and installed by the real Claude Code and Codex CLIs (pinned in
tests/clients/package.json), no model needed: the API each harness would call is a closed loopback port.

Each harness gets its own home (HOME, CLAUDE_CONFIG_DIR, CODEX_HOME) and a PATH with no hivemem on it, so the
plugins' command lines find hivemem where `hivemem client add --save` recorded it (docs/plugins.md).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Home, node_client, wait_for
from hivemem import __version__
from hivemem.cli import plugin

ROOT = Path(__file__).resolve().parent.parent
GRANTS = '[{"right":"read","scope":"*"},{"right":"write","scope":"*"}]'
MEMORY = "protobuf schemas live in the proto directory of this repository"
# A key for an API that is a closed port: nothing is ever sent with it.
API_KEY = "-".join(("sk", "ant", "closed", "port"))
PROMPT = "where do the protobuf schemas live"


class Harness:
    """A harness's own home beside a hivemem home, and its CLI run there."""

    def __init__(self, home: Home, command: str) -> None:
        self.home = home
        self.command = node_client(command)
        self.base = Path(home.base) / "harness"
        self.base.mkdir(exist_ok=True)
        node = shutil.which("node")
        env = {k: v for k, v in home.env.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "CODEX"))}
        env.update(
            HOME=str(self.base),
            CLAUDE_CONFIG_DIR=str(self.base / ".claude"),
            CODEX_HOME=str(self.base / ".codex"),
            PATH=os.pathsep.join([os.path.dirname(node) if node else "/usr/bin", "/usr/bin", "/bin"]),
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        (self.base / ".codex").mkdir(exist_ok=True)
        self.env = env

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
        proc = subprocess.run([self.command, *args], capture_output=True, text=True, timeout=timeout,
                              env={**self.env, **(env or {})}, cwd=ROOT, check=False)  # fmt: skip
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout + proc.stderr

    @contextlib.contextmanager
    def background(self, *args: str, cwd: str, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
        """A long-running harness process in a process group of its own, ended with that group."""
        with open(self.base / "background.log", "ab") as log:
            proc = subprocess.Popen([self.command, *args], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env={**self.env, **env}, cwd=cwd, start_new_session=True)  # fmt: skip
        try:
            yield proc
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port bound but never listening: every connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def ready(home: Home, client: str) -> str:
    """A memory to recall, and the client's token saved (which records this hivemem's path); the project dir."""
    home.ok("memory", "add", "--space", "user", "--content", MEMORY)
    home.ok("client", "add", "--name", client, "--grants", GRANTS, "--save")
    project = Path(home.base) / "project"
    project.mkdir(exist_ok=True)
    return str(project)


def store_rows(home: Home) -> list[tuple[str, int, str, str]]:
    return [(m["id"], m["revision"], m["updated"], m["snippet"]) for m in home.ok("memory", "list")["memories"]]


def mentions(directory: Path, word: str, skip: tuple[str, ...] = ()) -> list[str]:
    """Files under `directory` (not under `skip`) whose text mentions `word`."""
    found = []
    for path in directory.rglob("*"):
        rel = path.relative_to(directory).as_posix()
        if path.is_file() and not rel.startswith(skip):
            with contextlib.suppress(OSError):
                if word in path.read_text(errors="replace"):
                    found.append(rel)
    return found


def test_plugin_versions_are_the_package_version() -> None:
    files = plugin.files()
    for name in (".claude-plugin/plugin.json", ".codex-plugin/plugin.json"):
        assert json.loads(files[f"plugins/hivemem/{name}"])["version"] == __version__
    claude_market = json.loads(files[".claude-plugin/marketplace.json"])
    assert [p["version"] for p in claude_market["plugins"]] == [__version__]
    lines = [files[f"plugins/hivemem/{name}"] for name in (".mcp.json", "hooks/hooks.json", "codex/mcp.json",
                                                            "codex/hooks.json")]  # fmt: skip
    for text in lines:
        required = re.findall(r"--requires (\S+)", text)
        assert required and set(required) == {__version__}, text


def test_no_token_and_no_machine_path_in_the_plugin() -> None:
    for name, text in plugin.files().items():
        assert "hm1." not in text and "HIVEMEM_TOKEN=" not in text.replace("HIVEMEM_TOKEN=@owner", ""), name
        assert str(ROOT) not in text and "CLAUDE_PLUGIN_ROOT" not in text, name


def hook_line(harness: str, event: str) -> str:
    hooks = json.loads(plugin.files()[f"plugins/hivemem/{'hooks' if harness == 'claude-code' else 'codex'}/hooks.json"])
    entries = hooks["hooks"]["SessionStart" if event == "session-start" else "UserPromptSubmit"]
    return str(entries[0]["hooks"][0]["command"])


def test_the_hook_line_runs_the_recorded_hivemem_and_says_so_when_there_is_none(home: Home) -> None:
    env = {k: v for k, v in home.env.items() if k != "PATH"}
    env["PATH"] = "/usr/bin:/bin"
    line = hook_line("codex", "prompt-submit")
    body = json.dumps({"cwd": home.base, "prompt": PROMPT})
    lost = subprocess.run(["sh", "-c", line], input=body, capture_output=True, text=True, env=env, check=False)
    assert lost.returncode == 0 and "no hivemem found on PATH" in json.loads(lost.stdout)["systemMessage"]
    ready(home, "codex")
    found = subprocess.run(["sh", "-c", line], input=body, capture_output=True, text=True, env=env, check=False)
    assert found.returncode == 0, found
    assert MEMORY in json.loads(found.stdout)["hookSpecificOutput"]["additionalContext"]


def test_claude_code_validates_the_plugin_and_the_marketplace_strictly(home: Home) -> None:
    claude = Harness(home, "claude")
    for target in ("plugins/hivemem", "."):
        out = claude.run("plugin", "validate", "--strict", target)
        assert "Validation passed" in out, out


def test_claude_code_installs_connects_recalls_and_uninstalls_cleanly(home: Home) -> None:
    claude = Harness(home, "claude")
    project = ready(home, "claude-code")
    before = store_rows(home)
    claude.run("plugin", "marketplace", "add", "./")
    claude.run("plugin", "install", "hivemem@hivemem")
    listed = claude.run("mcp", "list", timeout=180)
    assert re.search(r"^plugin:hivemem:hivemem: .*--client claude-code.* - ✔ Connected$", listed, re.M), listed

    debug = claude.base / "debug.log"
    with closed_port() as port:
        api = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": API_KEY}
        with claude.background("-p", PROMPT, "--debug-file", str(debug), cwd=project, env=api):
            assert wait_for(lambda: "provided additionalContext" in (debug.read_text() if debug.exists() else ""),
                            120, 0.2), debug.read_text() if debug.exists() else "no debug log"  # fmt: skip
    log = debug.read_text()
    said = re.search(r"Hook UserPromptSubmit \((.*)\) provided additionalContext", log)
    assert said and "hook prompt-submit --harness claude-code --client claude-code" in said.group(1), log
    assert MEMORY in log and "hivemem recall: 1 memory." in log
    assert 'Skill prompt: showing "hivemem:hivemem"' in log or "Loaded 1 skills from plugin hivemem" in log

    claude.run("plugin", "uninstall", "hivemem@hivemem")
    claude.run("plugin", "marketplace", "remove", "hivemem")
    config = claude.base / ".claude"
    # What the harness keeps: settings, installed plugins, known marketplaces, its own config. The plugin cache
    # is marked orphaned for the harness to clear; conversation logs and backups record the run, not settings.
    assert mentions(config, "hivemem", skip=("plugins/cache", "projects", "backups", "telemetry", "debug")) == []
    for version in (config / "plugins" / "cache").glob("hivemem/hivemem/*"):
        assert (version / ".orphaned_at").exists(), version
    assert store_rows(home) == before, "the store is untouched"


def test_claude_code_without_a_saved_token_tells_the_person_the_command(home: Home) -> None:
    """hivemem on PATH, no token saved: the session-start hook's message, which Claude Code shows the person, is
    the command to run; the prompt still goes on to the (closed) API: nothing blocks."""
    claude = Harness(home, "claude")
    claude.env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), claude.env["PATH"]])
    project = Path(home.base) / "project"
    project.mkdir()
    claude.run("plugin", "marketplace", "add", "./")
    claude.run("plugin", "install", "hivemem@hivemem")
    debug = claude.base / "debug.log"

    def answered() -> bool:
        log = debug.read_text() if debug.exists() else ""
        return "Hook SessionStart:startup (SessionStart) success" in log and "API error (attempt 1/" in log

    with closed_port() as port:
        api = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": API_KEY}
        with claude.background("-p", PROMPT, "--debug-file", str(debug), cwd=str(project), env=api):
            assert wait_for(answered, 120, 0.2), debug.read_text() if debug.exists() else "no debug log"
    log = debug.read_text()
    said = re.search(r"Hook SessionStart:startup \(SessionStart\) success:\n(\{.*\})", log)
    assert said, log
    message = json.loads(said.group(1))["systemMessage"]
    assert "no hivemem token is saved for client 'claude-code'" in message
    assert "hivemem client add --name claude-code" in message and message.endswith("--save")


def test_codex_installs_enables_runs_the_hooks_and_removes_cleanly(home: Home) -> None:
    codex = Harness(home, "codex")
    project = ready(home, "codex")
    before = store_rows(home)
    codex.run("plugin", "marketplace", "add", "./")
    codex.run("plugin", "add", "hivemem@hivemem")
    listed = codex.run("mcp", "list")
    row = next((line for line in listed.splitlines() if line.startswith("hivemem ")), "")
    assert "--client codex" in row and re.search(r"\benabled\b", row), listed

    sessions = codex.base / ".codex" / "sessions"

    def rollout() -> str:
        return "".join(p.read_text() for p in sessions.rglob("*.jsonl")) if sessions.exists() else ""

    with closed_port() as port:
        provider = (f'model_providers.closed={{name="closed",base_url="http://127.0.0.1:{port}/v1",'
                    'env_key="OPENAI_API_KEY",wire_api="responses"}')  # fmt: skip
        args = ("exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", "-c", provider,
                "-c", "model_provider=closed", PROMPT)  # fmt: skip
        with codex.background(*args, cwd=project, env={"OPENAI_API_KEY": API_KEY}):
            assert wait_for(lambda: "hivemem recall: 1 memory." in rollout(), 120, 0.2), rollout()[-4000:]
    contexts = [json.loads(line) for line in rollout().splitlines() if "hivemem recall:" in line]
    texts = [c["text"] for item in contexts for c in item["payload"].get("content", []) if "text" in c]
    assert any(MEMORY in t and t.startswith("hivemem recall: 1 memory.") for t in texts), contexts
    assert "hivemem" in rollout().split("### Available skills", 1)[-1].split("</skills_instructions>", 1)[0]

    codex.run("plugin", "remove", "hivemem@hivemem")
    codex.run("plugin", "marketplace", "remove", "hivemem")
    config = codex.base / ".codex"
    assert "hivemem" not in (config / "config.toml").read_text()
    cache = config / "plugins" / "cache" / "hivemem"
    assert [p for p in cache.rglob("*") if not p.is_dir()] == [], "the plugin's files are gone (Codex keeps a dir)"
    assert not (config / "hooks.json").exists()
    assert store_rows(home) == before, "the store is untouched"


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_the_plugin_mcp_line_serves_the_tools_the_server_lists(home: Home, harness: str) -> None:
    """The plugin's MCP command, run as the harness runs it, lists exactly the tools the server declares."""
    inspector = node_client("mcp-inspector")
    ready(home, harness)
    mcp = json.loads(plugin.files()[f"plugins/hivemem/{'.mcp.json' if harness == 'claude-code' else 'codex/mcp.json'}"])
    server: dict[str, Any] = mcp["mcpServers"]["hivemem"]
    env = {k: v for k, v in home.env.items() if k != "PATH"}
    env["PATH"] = os.pathsep.join([os.path.dirname(shutil.which("node") or "/usr/bin/node"), "/usr/bin", "/bin"])
    proc = subprocess.run([inspector, "--cli", server["command"], *server["args"], "--method", "tools/list"],
                          capture_output=True, text=True, env=env, cwd=home.base, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc
    from hivemem.mcp.tools import DEFAULT

    assert [t["name"] for t in json.loads(proc.stdout)["tools"]] == list(DEFAULT)


@pytest.mark.parametrize(("harness", "install"), [("claude-code", "claude plugin install hivemem@hivemem"),
                                                  ("codex", "codex plugin add hivemem@hivemem")])  # fmt: skip
def test_setup_names_the_plugin_before_the_snippets(home: Home, harness: str, install: str) -> None:
    out = home.cli("setup", harness, token=None).out
    lines = out.splitlines()
    assert install in lines and lines.index(install) < next(i for i, x in enumerate(lines) if x.startswith("1. "))
    save = next(x for x in lines if x.endswith("--save"))
    assert f"client add --name {harness} " in save and "HIVEMEM_TOKEN=@owner" in save
    assert " mcp add " in out, "the paste-a-snippet path is still printed whole"
    assert "marketplace" not in home.cli("setup", "opencode", token=None).out


class GitBackend(http.server.BaseHTTPRequestHandler):
    """Git's own smart HTTP server (`git http-backend`, a CGI program) behind a loopback listener, so a harness
    can clone the repository by URL as it would from a forge."""

    root = ""

    def do_GET(self) -> None:
        self.cgi()

    def do_POST(self) -> None:
        self.cgi()

    def cgi(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        env = {**os.environ, "GIT_PROJECT_ROOT": self.root, "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
               "QUERY_STRING": query, "REQUEST_METHOD": self.command, "REMOTE_ADDR": "127.0.0.1",
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(length),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}  # fmt: skip
        body = self.rfile.read(length) if length else b""
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        fields = [line.split(b":", 1) for line in head.split(b"\r\n") if b":" in line]
        status = next((int(v.split()[0]) for k, v in fields if k.lower() == b"status"), 200)
        self.send_response(status)
        for key, value in fields:
            if key.lower() != b"status":
                self.send_header(key.decode(), value.strip().decode())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def repository_url(base: Path) -> Iterator[str]:
    """This repository's files (tracked and new, as a clone would have them once committed), committed to a bare
    repository served over HTTP on loopback; yields its URL."""
    work, bare = base / "work", base / "hivemem.git"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, work / name)
    git = ["git", "-c", "user.name=hivemem tests", "-c", "user.email=tests@hivemem.invalid"]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *step], cwd=work, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, capture_output=True)
    handler = type("Handler", (GitBackend,), {"root": str(base)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hivemem.git"
    finally:
        server.shutdown()
        server.server_close()


def test_both_harnesses_install_from_the_repositorys_url(home: Home) -> None:
    claude, codex = Harness(home, "claude"), Harness(home, "codex")
    ready(home, "claude-code")
    home.ok("client", "add", "--name", "codex", "--grants", GRANTS, "--save")
    with repository_url(Path(home.base) / "served") as url:
        claude.run("plugin", "marketplace", "add", url)
        claude.run("plugin", "install", "hivemem@hivemem")
        codex.run("plugin", "marketplace", "add", url)
        codex.run("plugin", "add", "hivemem@hivemem")
    listed = claude.run("mcp", "list", timeout=180)
    assert re.search(r"^plugin:hivemem:hivemem: .*--client claude-code.* - ✔ Connected$", listed, re.M), listed
    row = next((line for line in codex.run("mcp", "list").splitlines() if line.startswith("hivemem ")), "")
    assert "--client codex" in row and re.search(r"\benabled\b", row), row
