"""Shared helpers for the benchmark scripts: isolated homes, prefill, text generation, stats, tables.

Not a test module. Every script in bench/ imports this file from its own directory.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import fcntl
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import accumulate
from pathlib import Path
from typing import Any

import apsw

from hivemem import config as config_mod
from hivemem import ops, paths
from hivemem.auth import owner
from hivemem.client import DaemonClient, wait_stopped
from hivemem.errors import HivememError
from hivemem.store import open_store

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
DEFAULT_SIZES = "1000,10000,100000"


# ---------------------------------------------------------------- arguments and output


def sizes_arg(parser: argparse.ArgumentParser, default: str = DEFAULT_SIZES) -> None:
    parser.add_argument("--sizes", default=default, help=f"comma-separated store sizes (default {default})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes under bench/out/")


def parse_sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        mult = 1000 if part.endswith("k") else 1
        out.append(int(float(part.rstrip("k")) * mult))
    return out


def machine() -> dict[str, str]:
    """nproc, CPU model, RAM, Python, APSW/SQLite versions, kernel, date."""
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = "unknown"
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "ram": ram,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "apsw": apsw.apsw_version(),
        "sqlite": apsw.sqlite_lib_version(),
    }


def print_machine(title: str) -> None:
    m = machine()
    print(f"# {title}")
    print(f"# {m['date']} | nproc {m['nproc']} | {m['cpu']} | RAM {m['ram']} | Linux {m['kernel']}")
    print(f"# Python {m['python']} | APSW {m['apsw']} | SQLite {m['sqlite']} | argv: {' '.join(sys.argv)}")
    print(f"# load average at start: {load()} (other processes share this machine; ratios are same-run)")
    print()


def load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a Markdown table (pasteable into RESULTS.md)."""
    rows = [list(row) for row in rows]
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(isinstance(row[i], int | float) for row in rows) for i in range(len(headers))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 1) + (":" if num else "-") for w, num in zip(widths, numeric, strict=True)) + "|")
    for row in cells[1:]:
        padded = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric, strict=True)]
        print("| " + " | ".join(padded) + " |")
    print(flush=True)


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on sorted values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> float:
    return seconds * 1000.0


# ---------------------------------------------------------------- isolated homes and the daemon


def team_store(home: Home, server: str) -> Any:
    """Point `home` at a fresh PostgreSQL database on `server` (store.url); returns the function dropping it."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"hm_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(server)._replace(path="/" + name))
    directory = os.path.join(home.env["XDG_CONFIG_HOME"], "hivemem")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.open(os.path.join(directory, "config.toml"), os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(f"store.url = {json.dumps(url)}\n")

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return drop


class Home:
    """A temporary XDG home (data, config, state, runtime) under bench/out/, made current for this process."""

    def __init__(self, name: str) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        self.base = tempfile.mkdtemp(prefix=f"{name}-", dir=OUT)
        self.env = {k: v for k, v in os.environ.items() if k == "HIVEMEM_BENCH_DATA" or not k.startswith("HIVEMEM_")}
        for var, sub in zip(XDG, ("data", "config", "state", "run"), strict=True):
            self.env[var] = os.path.join(self.base, sub)
        self.activate()

    def activate(self) -> None:
        """Point this process's environment at the home (DaemonClient and paths read it)."""
        for key in [k for k in os.environ if k.startswith("HIVEMEM_") and k != "HIVEMEM_BENCH_DATA"]:
            del os.environ[key]
        for var in XDG:
            os.environ[var] = self.env[var]

    @property
    def paths(self) -> paths.Paths:
        return paths.resolve("", os.path.join(self.env["XDG_CONFIG_HOME"], "hivemem", "config.toml"))

    @property
    def cli_env(self) -> dict[str, str]:
        return {**self.env, "HIVEMEM_TOKEN": "@owner"}

    def client(self, *, start: bool = True) -> DaemonClient:
        self.activate()
        return DaemonClient(config_mod.load(), token="@owner", start=start, name="bench")

    def daemon_pid(self) -> int | None:
        try:
            with open(self.paths.socket_lock) as f:
                pid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 and _alive(pid) else None

    def running(self) -> bool:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.paths.socket)
            return True
        except OSError:
            return False
        finally:
            sock.close()

    def stop(self) -> None:
        """daemon.stop as owner, then wait until the daemon has checkpointed and released the store lock."""
        self.activate()  # the socket's folder comes from the process's environment, perhaps another home's
        if not self.running():
            return
        client = self.client(start=False)
        try:
            client.call("daemon.stop")
            wait_stopped(client, 10.0)
        except HivememError:
            pass
        finally:
            client.close()
        wait_unlocked(self.paths.store_lock, 30.0)
        reap()

    def cleanup(self, keep: bool = False) -> None:
        self.stop()
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except OSError:
        return False
    return True


def reap() -> None:
    """Collect exited on-demand daemons (they are children of this process)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def wait_unlocked(path: str, budget: float) -> bool:
    """Wait until nobody holds the flock on `path` (the daemon has finished closing the store)."""
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        except BlockingIOError:
            time.sleep(0.02)
        finally:
            os.close(fd)
    return False


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1])
    return out


# ---------------------------------------------------------------- prefill


def prefill(home: Home, items: Iterable[tuple[str, str]]) -> int:
    """Add memories with the daemon stopped, through hivemem's own dispatch (row, FTS, version, event).

    The only shortcut: synchronous=OFF on the connection while filling (prefill time is not measured);
    it is set back to FULL and the WAL checkpointed before the store is closed.
    """
    if home.running():
        raise RuntimeError("prefill needs the daemon stopped")
    old = os.umask(0o077)
    try:
        paths.ensure_dir(home.paths.data_dir)
        store = open_store(home.paths.store)
    finally:
        os.umask(old)
    store.conn.execute("PRAGMA synchronous=OFF")
    who = owner()
    added = 0
    for space, content in items:
        if ops.dispatch(store, who, "memory.add", {"space": space, "content": content})["changed"]:
            added += 1
    store.conn.execute("PRAGMA synchronous=FULL")
    store.conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    store.close()
    return added


# ---------------------------------------------------------------- synthetic text


# fmt: off
FUNCTION_WORDS = (
    "the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "was", "as", "we", "you", "this",
    "at", "be", "are", "i", "have", "not", "but", "from", "they", "or", "by", "so", "if", "my", "our", "its",
    "about", "when", "there", "all", "will", "can", "just", "what", "been", "into", "more", "also", "than", "then",
    "after",
)
# fmt: on
SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"] + ["th", "sh", "ck", "ng", "st", "er", "an", "or"]


class TextGen:
    """Deterministic English-like text: Zipf(1.1)-distributed pseudo-words mixed with common function words."""

    def __init__(self, seed: int = 7, vocab: int = 30000) -> None:
        rng = random.Random(seed)
        words: dict[str, None] = {}
        while len(words) < vocab:
            n = rng.choice((1, 2, 2, 2, 3, 3, 3, 4))
            w = "".join(rng.choice(SYLLABLES) for _ in range(n))
            if len(w) > 2:
                words[w] = None
        self.words = list(words)
        self.cum = list(accumulate(1.0 / (r**1.1) for r in range(1, vocab + 1)))
        self.total = self.cum[-1]
        self.rng = random.Random(seed + 1)

    def word(self) -> str:
        return self.words[bisect.bisect_left(self.cum, self.rng.random() * self.total)]

    def text(self, nbytes: int) -> str:
        """About `nbytes` of sentences (~40% function words)."""
        rng = self.rng
        out: list[str] = []
        size = 0
        sentence = 0
        while size < nbytes:
            w = rng.choice(FUNCTION_WORDS) if rng.random() < 0.4 else self.word()
            if sentence == 0:
                w = w.capitalize()
            sentence += 1
            if sentence >= rng.randint(8, 18):
                w += "."
                sentence = 0
            elif rng.random() < 0.05:
                w += ","
            out.append(w)
            size += len(w) + 1
        text = " ".join(out)
        return text if text.endswith(".") else text + "."

    def query(self) -> str:
        """A question-like query: 2-4 content words and 1-3 function words (which search drops)."""
        rng = self.rng
        parts = [self.word() for _ in range(rng.randint(2, 4))]
        parts += [rng.choice(FUNCTION_WORDS) for _ in range(rng.randint(1, 3))]
        rng.shuffle(parts)
        return "what " + " ".join(parts) + "?"

    def memories(self, n: int, lo: int, hi: int, spaces: int = 20) -> Iterator[tuple[str, str]]:
        """n (space, content) pairs, content lengths uniform in [lo, hi] bytes, over `spaces` spaces."""
        for i in range(n):
            yield f"bench/s{i % spaces:02d}", self.text(self.rng.randint(lo, hi))


# ---------------------------------------------------------------- data and subprocesses


def data_dir() -> Path | None:
    """The evaluation data folder: $HIVEMEM_BENCH_DATA, else ../shared/data/ beside the repo; None if absent."""
    env = os.environ.get("HIVEMEM_BENCH_DATA")
    for candidate in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data"]:
        if candidate.is_dir():
            return candidate
    return None


def locomo_root() -> Path | None:
    """The LoCoMo folder of the evaluation data, or None after printing why the benchmark skips."""
    data = data_dir()
    root = data / "locomo" if data else None
    if root is None or not (root / "corpus.jsonl").exists():
        print("SKIP: LoCoMo data not found: set HIVEMEM_BENCH_DATA to the folder holding locomo/, or place it at "
              f"{REPO.parent / 'shared' / 'data'} (evaluation only; never copy it into the repo).")  # fmt: skip
        return None
    return root


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def timed_run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, check=False, cwd="/")
    return time.perf_counter() - t, proc


def hivemem_exe() -> str:
    """The installed `hivemem` entry point beside this interpreter."""
    exe = Path(sys.executable).parent / "hivemem"
    return str(exe) if exe.exists() else shutil.which("hivemem") or "hivemem"
