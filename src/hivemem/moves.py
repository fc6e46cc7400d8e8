"""The journal of moves under way between the personal store and a mounted team store (docs/team.md, D397).

A move across the two stores is two writes; `moves.json`, in the team directory beside the personal store, holds
each move between its first write and its last: the source store, id and revision, the target space and the SHA-256
of the content, never the text. Owner-only (0600), rewritten atomically, never read through a link. The daemon
(`daemon/crossmove.py`) writes and repairs it; `hivemem doctor` reports what it holds (`team.moves`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any

from hivemem import paths
from hivemem.errors import Failed

JOURNAL = "moves.json"
MAX_BYTES = 1 << 20  # a journal holds a few entries of a few hundred bytes each
KEY = re.compile(r"^[0-9A-Za-z_-]{1,64}$")
MEMORY = re.compile(r"^m[1-9][0-9]{0,17}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def directory(store_path: str) -> str:
    """The team directory beside the personal store: this machine's exports of the team store, and the journal."""
    return os.path.join(os.path.dirname(store_path), "team")


class Journal:
    """The moves under way, as a JSON list in an owner-only file; read and rewritten on the event loop only."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, JOURNAL)

    def entries(self) -> list[dict[str, Any]]:
        try:  # O_NONBLOCK: a FIFO planted here must not hang the daemon; fstat then refuses it
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        except OSError as exc:  # a symbolic link (ELOOP) or a file this user cannot read
            raise Failed("move_journal", f"{self.path} cannot be read: {exc.strerror}",
                         fix=f"check {self.path}, then remove it") from None  # fmt: skip
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise Failed("move_journal", f"{self.path} is not an owner-only file; no move is repaired from it",
                             fix=f"check {self.path}, then remove it")  # fmt: skip
            data = os.read(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
        try:
            found = json.loads(data) if len(data) <= MAX_BYTES else None
        except ValueError:
            found = None
        if not isinstance(found, list) or not all(_entry(e) for e in found):
            raise Failed("move_journal", f"{self.path} is not a journal of moves",
                         fix=f"check {self.path}, then remove it")  # fmt: skip
        return found

    def add(self, entry: dict[str, Any]) -> None:
        self._write([*self.entries(), entry])

    def remove(self, key: str) -> None:
        left = [e for e in self.entries() if e["key"] != key]
        if left:
            self._write(left)
        else:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                return
            paths.fsync_dir(self.directory)

    def _write(self, entries: list[dict[str, Any]]) -> None:
        paths.ensure_dir(self.directory)
        paths.write_private(self.path, json.dumps(entries, sort_keys=True).encode())


def _entry(e: object) -> bool:
    """One move as the daemon wrote it; anything else (a hand-edited or damaged file) refuses the whole journal
    before a repair acts on it (D409)."""
    return (isinstance(e, dict) and isinstance(e.get("key"), str) and KEY.match(e["key"]) is not None
            and e.get("from") in ("personal", "team") and isinstance(e.get("id"), str)
            and MEMORY.match(e["id"]) is not None and type(e.get("revision")) is int and e["revision"] >= 1
            and isinstance(e.get("space"), str) and 0 < len(e["space"]) <= 256
            and isinstance(e.get("sha256"), str) and SHA256.match(e["sha256"]) is not None)  # fmt: skip
