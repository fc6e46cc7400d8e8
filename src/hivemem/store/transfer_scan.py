"""The secret scan of a large import document, shared between a worker process and the daemon (D201).

An import document's memories are checked in the daemon for everything but secrets, and the secret scan, two
thirds of the check's time, runs beside the import: a worker process (`python -m hivemem.store.transfer_scan`,
given the very bytes the daemon parsed) scans the memories in pieces of CHUNK from the first one up, while the
daemon applies the pieces the worker has cleared and, whenever it would wait, scans pieces itself from the
last one down, telling the worker where it has got to so that the worker stops there. A memory is written
only once it has been scanned and found clean, and the document's first problem is the one a whole check in
order finds: a secret in a piece is raised only once every piece before it is scanned. The worker only
speeds this up: if it fails, dies or stalls, the daemon scans what is left itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
from typing import Any

from hivemem import secrets
from hivemem.errors import HivememError, from_wire
from hivemem.store.transfer_check import scan_memories

WORKER_MIN_BYTES = 4 << 20  # smaller documents are checked whole in the daemon (about 3,000 memories of 1 KB: the
# worker takes ~0.3 s to start, about what the daemon needs to check and write that many)
CHUNK = 250  # memories scanned as one piece (about 20 ms of scanning for memories of 1 KB)
STALL_S = 2.0  # a worker silent this long while the daemon waits on it: the daemon scans that piece itself
COMMAND = ("-m", "hivemem.store.transfer_scan")  # the worker, run by this Python


def start(text: bytes, limit: int) -> Scan | None:
    """A scan of the document `text` with its worker started, or None for a document checked whole here."""
    if len(text) < WORKER_MIN_BYTES:
        return None
    return Scan(text, limit)


class Scan:
    """The memories' scan: which pieces are cleared, the first problem of each piece that has one, and the
    worker (the `transfer_check.Scan` protocol)."""

    def __init__(self, text: bytes, limit: int) -> None:
        self.limit = limit
        self.items: list[Any] = []
        self.chunks = 0
        self.cleared: set[int] = set()
        self.errors: dict[int, HivememError] = {}
        self.prefix = 0  # pieces [0, prefix) are cleared
        self.worker_at = 0  # the piece the worker is on (every piece below it is reported)
        self.claimed: set[int] = set()  # pieces the daemon took
        self.heard = b""
        claims, self._claims = os.pipe()
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, *COMMAND, str(claims)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, pass_fds=(claims,), bufsize=0)  # fmt: skip
        except OSError:
            self.proc = None
        finally:
            os.close(claims)
        self._feeder: threading.Thread | None = None
        if self.proc is not None:
            self._feeder = threading.Thread(target=_feed, args=(self.proc.stdin, text, limit), daemon=True)
            self._feeder.start()

    def bind(self, items: list[Any], limit: int) -> None:
        self.items, self.limit = items, limit
        self.chunks = -(-len(items) // CHUNK)

    def clear(self, stop: int) -> None:
        self._settle(-(-stop // CHUNK))

    def finish(self) -> None:
        self._settle(self.chunks)

    def close(self) -> None:
        """Stop the worker (if it still runs) and release its pipes."""
        if self._claims >= 0:
            os.close(self._claims)
            self._claims = -1
        self._lost()

    def _settle(self, needed: int) -> None:
        """Return once pieces [0, needed) are cleared. Once a piece holds a problem, nothing more is applied:
        the pieces before it are scanned and the first problem is raised."""
        while True:
            self._hear(0)
            while self.prefix in self.cleared:
                self.prefix += 1
            low = min(self.errors) if self.errors else self.chunks
            if self.prefix >= (low if self.errors else needed):
                if self.errors:
                    raise self.errors[low]
                return
            top = self._top(low)
            if top is not None:
                self._claim(top)
                self._scan(top)
            elif self.proc is None or not self._hear(STALL_S):
                self._scan(self.prefix)  # no worker, or one that does not answer: scan the next piece here

    def _top(self, low: int) -> int | None:
        """The last piece below `low`, above the worker's, that nobody has scanned or taken."""
        if self.proc is None:
            return None
        for k in range(low - 1, self.worker_at, -1):
            if k not in self.claimed and k not in self.cleared and k not in self.errors:
                return k
        return None

    def _claim(self, k: int) -> None:
        self.claimed.add(k)
        if self._claims >= 0:
            with contextlib.suppress(OSError):  # the worker is gone; what it reported stands
                os.write(self._claims, b"%d\n" % k)

    def _scan(self, k: int) -> None:
        if k in self.cleared or k in self.errors:
            return
        try:
            scan_memories(self.items, k * CHUNK, min((k + 1) * CHUNK, len(self.items)), self.limit)
        except HivememError as exc:
            self.errors[k] = exc
            return
        self.cleared.add(k)

    def _hear(self, timeout: float) -> bool:
        """Take in what the worker has said (waiting up to `timeout` for something); False if it said nothing."""
        if self.proc is None or self.proc.stdout is None:
            return False
        fd = self.proc.stdout.fileno()
        if not select.select([fd], [], [], timeout)[0]:
            return False
        said = os.read(fd, 65536)
        if not said:
            self._lost()
            return False
        lines = (self.heard + said).split(b"\n")
        self.heard = lines.pop()
        for line in lines:
            self._heard(line)
        return True

    def _heard(self, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        if kind == b"c":  # piece k is clear
            k = int(rest)
            self.cleared.add(k)
            self.worker_at = max(self.worker_at, k + 1)
        elif kind == b"e":  # piece k holds the problem that follows
            piece, _, wire = rest.partition(b" ")
            self.errors.setdefault(int(piece), from_wire(json.loads(wire)))
            self._lost()
        else:  # done, or failed: either way it scans no more
            self._lost()

    def _lost(self) -> None:
        """The worker scans no more (or the import is over): stop it; the daemon does the rest."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if self._feeder is not None:
            self._feeder.join()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _feed(pipe: Any, text: bytes, limit: int) -> None:
    """Hand the worker its job: the limit and length on one line, then the document's bytes."""
    try:
        pipe.write(b"%d %d\n" % (limit, len(text)))
        view = memoryview(text)
        while view:  # an unbuffered pipe may take part of a write
            view = view[pipe.write(view) :]
        pipe.close()
    except (OSError, ValueError):
        pass  # the worker is gone (or was stopped): the daemon scans without it


def _worker(claims_fd: int) -> int:
    """`python -m hivemem.store.transfer_scan FD`: scan the document on stdin piece by piece from the first,
    reporting each piece on stdout (`c K`, or `e K <error>` and stop), until a piece the daemon took (read
    from FD) or the end (`d`). Anything unexpected is `f`: the daemon then scans alone."""
    with open(0, "rb", closefd=False) as job, open(1, "wb", closefd=False) as out:  # pipes, never a terminal
        try:
            secrets.warm()  # while the daemon sends the document
            limit, size = (int(x) for x in job.readline().split())
            items = json.loads(job.read(size))["memories"]
            _scan_pieces(items, limit, claims_fd, out)
        except Exception:  # any failure only means that the daemon scans alone
            out.write(b"f\n")
    return 0


def _scan_pieces(items: list[Any], limit: int, claims_fd: int, out: Any) -> None:
    taken = len(items)
    pending = b""
    k = 0
    while k * CHUNK < len(items):
        while select.select([claims_fd], [], [], 0)[0]:
            said = os.read(claims_fd, 4096)
            if not said:
                return  # the daemon is done with this import
            lines = (pending + said).split(b"\n")
            pending = lines.pop()
            taken = min([taken, *(int(x) for x in lines)])
        if k >= taken:
            break
        try:
            scan_memories(items, k * CHUNK, min((k + 1) * CHUNK, len(items)), limit)
        except HivememError as exc:
            out.write(b"e %d %s\n" % (k, json.dumps(exc.to_wire()).encode("utf-8")))
            return
        out.write(b"c %d\n" % k)
        out.flush()
        k += 1
    out.write(b"d\n")


if __name__ == "__main__":
    sys.exit(_worker(int(sys.argv[1])))
