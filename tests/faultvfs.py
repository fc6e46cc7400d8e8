"""A fault-injecting SQLite VFS (APSW) and a launcher that runs the real daemon on it.

The VFS sits between SQLite and the unix VFS. For the store's own files (the database, its WAL and journal) it keeps
what the process has written in a page cache of its own and writes to the real file only at `xSync`: so a process
that dies (`kill -9`, or the VFS cutting the power itself at its N-th I/O operation) leaves on disk exactly what
was synced, as a power cut would. In `reorder` mode the "OS" also flushes a random subset of the unsynced writes
early and in any order, as a buffered file system may. Locking and the WAL index (-shm) are the unix VFS's own.

It also fails a chosen `xWrite`, `xSync`, `xTruncate` or `xLock` with `SQLITE_IOERR`, `SQLITE_FULL` or
`SQLITE_BUSY`, once or from then on, armed through the launcher's stdin.

Launcher: `python faultvfs.py serve` runs `hivemem.daemon.main.serve()` — the daemon's real code path — with the
VFS made SQLite's default. Settings come from the environment:

    HIVEMEM_FAULT_MODE     none (write-through) | drop (lose every unsynced write) | reorder (lose a random subset)
    HIVEMEM_FAULT_SEED     seed of the reorder choices
    HIVEMEM_FAULT_CUT_AT   cut the power (SIGKILL itself) just before the N-th write/sync/truncate of a store file
    HIVEMEM_FAULT_ARM      kind:nth:error[:persistent] armed from the start (a migration's I/O)
    HIVEMEM_FAULT_SYNC     normal: the negative control, the writer connection set to synchronous=NORMAL
    HIVEMEM_FAULT_CONTROL  1: read commands from stdin (`arm KIND NTH ERROR [persistent]`, `count`, `disarm`)
                           and answer each with one JSON line on stdout
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import apsw

KINDS = ("xWrite", "xSync", "xTruncate", "xLock")
ERRORS: dict[str, type[BaseException]] = {"IOERR": apsw.IOError, "FULL": apsw.FullError, "BUSY": apsw.BusyError}
EARLY_FLUSH = 0.5  # reorder mode: the chance that one unsynced write reaches the disk before its sync


@dataclass
class Fault:
    kind: str
    nth: int
    error: str
    persistent: bool = False
    fired: int = 0


@dataclass
class FileState:
    """What the process sees of one file (data) and the writes the disk has not got yet (pending)."""

    data: bytearray
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)


class Disk:
    """State shared by every handle of the process: the page cache, I/O counters, the armed fault."""

    def __init__(self, store: str, mode: str, seed: int, cut_at: int | None) -> None:
        self.store = os.path.realpath(store)
        self.mode = mode
        self.rng = random.Random(seed)
        self.cut_at = cut_at
        self.lock = threading.RLock()
        self.files: dict[str, FileState] = {}
        self.ops = 0  # writes, syncs and truncates of store files since start: the power-cut clock
        self.counts = dict.fromkeys(KINDS, 0)  # per kind since the last arm
        self.fault: Fault | None = None

    def is_store_file(self, name: str) -> bool:
        return name in (self.store, self.store + "-wal", self.store + "-journal")

    def tick(self, kind: str) -> None:
        """Count one I/O call; cut the power or raise the armed fault when its turn comes."""
        with self.lock:
            self.counts[kind] += 1
            if kind != "xLock":
                self.ops += 1
                if self.cut_at is not None and self.ops >= self.cut_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            fault = self.fault
            if fault is None or fault.kind != kind:
                return
            n = self.counts[kind]
            if n == fault.nth or (fault.persistent and n > fault.nth):
                fault.fired += 1
                raise ERRORS[fault.error](f"injected {fault.error} at {kind} #{n}")


class FaultFile(apsw.VFSFile):  # type: ignore[misc]
    def __init__(self, disk: Disk, name: Any, flags: list[int], buffered: bool) -> None:
        super().__init__("unix", name, flags)
        self.disk = disk
        self.path = name.filename() if isinstance(name, apsw.URIFilename) else str(name)
        self.buffered = buffered
        if buffered:
            with disk.lock:
                if self.path not in disk.files:
                    size = super().xFileSize()
                    disk.files[self.path] = FileState(bytearray(super().xRead(size, 0) if size else b""))
                self.state = disk.files[self.path]

    def xRead(self, amount: int, offset: int) -> bytes:
        if not self.buffered:
            return bytes(super().xRead(amount, offset))
        with self.disk.lock:
            return bytes(self.state.data[offset : offset + amount])  # short: SQLite zero-fills and knows

    def xWrite(self, data: bytes, offset: int) -> None:
        self.disk.tick("xWrite")
        if not self.buffered:
            super().xWrite(data, offset)
            return
        with self.disk.lock:
            buf = self.state.data
            if len(buf) < offset:
                buf.extend(bytes(offset - len(buf)))
            buf[offset : offset + len(data)] = data
            self.state.pending.append(("w", offset, bytes(data)))
            if self.disk.mode == "reorder" and self.disk.rng.random() < EARLY_FLUSH:
                super().xWrite(data, offset)  # the OS wrote this one back early, out of order

    def xTruncate(self, size: int) -> None:
        self.disk.tick("xTruncate")
        if not self.buffered:
            super().xTruncate(size)
            return
        with self.disk.lock:
            del self.state.data[size:]
            self.state.pending.append(("t", size, b""))

    def xSync(self, flags: int) -> None:
        self.disk.tick("xSync")
        if self.buffered:
            with self.disk.lock:
                for op, offset, data in self.state.pending:
                    if op == "w":
                        super().xWrite(data, offset)
                    else:
                        super().xTruncate(offset)
                self.state.pending.clear()
        super().xSync(flags)

    def xFileSize(self) -> int:
        if not self.buffered:
            return int(super().xFileSize())
        with self.disk.lock:
            return len(self.state.data)

    def xLock(self, level: int) -> None:
        self.disk.tick("xLock")
        super().xLock(level)


class FaultVFS(apsw.VFS):  # type: ignore[misc]
    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        super().__init__("hivemem-fault", "unix", makedefault=True)

    def xOpen(self, name: Any, flags: list[int]) -> apsw.VFSFile:
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        if path is None or not self.disk.is_store_file(str(path)):
            return apsw.VFSFile("unix", name, flags)
        return FaultFile(self.disk, name, flags, buffered=self.disk.mode != "none")

    def xDelete(self, name: str, syncdir: bool) -> None:
        with self.disk.lock:
            self.disk.files.pop(name, None)
        super().xDelete(name, syncdir)


def _control(disk: Disk) -> None:
    """Commands on stdin, one JSON answer per line on stdout."""
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        with disk.lock:
            if words[0] == "arm":
                disk.counts = dict.fromkeys(KINDS, 0)
                disk.fault = Fault(words[1], int(words[2]), words[3], persistent="persistent" in words[4:])
                answer: dict[str, Any] = {"armed": True}
            elif words[0] in ("count", "disarm"):
                fired = disk.fault.fired if disk.fault else 0
                answer = {"counts": dict(disk.counts), "fired": fired}
                disk.fault = None
                disk.counts = dict.fromkeys(KINDS, 0)
            else:
                answer = {"error": f"unknown command {words[0]}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _normal_sync() -> None:
    """The negative control: the writer connection runs with synchronous=NORMAL instead of FULL."""
    from hivemem.store.sqlite import migrations

    original = migrations.connect

    def connect(path: str, **kw: Any) -> Any:
        conn = original(path, **kw)
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    migrations.connect = connect


def main() -> int:
    from hivemem import config, paths

    where = paths.resolve(config.load()["store.path"])
    cut = os.environ.get("HIVEMEM_FAULT_CUT_AT")
    disk = Disk(where.store, os.environ.get("HIVEMEM_FAULT_MODE", "none"),
                int(os.environ.get("HIVEMEM_FAULT_SEED", "0")), int(cut) if cut else None)  # fmt: skip
    armed = os.environ.get("HIVEMEM_FAULT_ARM")
    if armed:
        kind, nth, error, *rest = armed.split(":")
        disk.fault = Fault(kind, int(nth), error, persistent=bool(rest))
    vfs = FaultVFS(disk)
    if os.environ.get("HIVEMEM_FAULT_SYNC") == "normal":
        _normal_sync()
    if os.environ.get("HIVEMEM_FAULT_CONTROL") == "1":
        threading.Thread(target=_control, args=(disk,), name="fault-control", daemon=True).start()
    from hivemem.daemon.main import serve
    from hivemem.errors import HivememError

    try:
        code = serve()
    except HivememError as exc:
        sys.stderr.write(json.dumps({"start_error": exc.to_wire()}) + "\n")
        code = exc.exit_code
    sys.stderr.write(json.dumps({"counts": disk.counts, "ops": disk.ops}) + "\n")
    del vfs
    return code


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    sys.exit(main())
