"""The derived full-text index holds exactly the live, active memories, with their current text (SPEC 5.3).

A random sequence of every verb that touches the index runs in-process on a real store file; after each
step the index is compared with the canonical rows. memory_fts reads its text from `memories`, so a stale
or missing index entry shows up as a wrong hit, a missed hit or a wrong document set."""

from __future__ import annotations

import random
import tempfile
from typing import Any

from hivemem import ops
from hivemem.errors import HivememError
from hivemem.store import open_store
from hivemem.store.clients import owner


def live_active(conn: Any) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM memories WHERE deleted IS NULL AND status = 'active'")}


def indexed(conn: Any) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM memory_fts_docsize")}


def found(store: Any, word: str) -> set[int]:
    hits = ops.dispatch(store, owner(), "memory.search", {"query": word, "limit": 100})["results"]
    return {int(h["id"][1:]) for h in hits}


def test_the_index_follows_every_change() -> None:
    rng = random.Random(20261130)
    store = open_store(tempfile.mkdtemp(prefix="hm-fts-") + "/store.db")
    me = owner()
    words: dict[int, str] = {}  # memory -> the unique word its current content holds
    for step in range(400):
        action = rng.choice(["add", "add", "update", "delete", "restore", "purge"])
        ids = list(words)
        word = f"tok{step}x"
        try:
            if action == "add" or not ids:
                made = ops.dispatch(store, me, "memory.add", {"space": "user", "content": f"shared {word}",
                                                               "title": rng.choice(["", f"t {word}"])})  # fmt: skip
                words[int(made["id"][1:])] = word
                continue
            memory = rng.choice(ids)
            current = ops.dispatch(store, me, "memory.get", {"id": f"m{memory}", "include_deleted": True})
            if action == "update":
                edit = {"id": f"m{memory}", "revision": current["revision"], "content": f"shared {word}"}
                ops.dispatch(store, me, "memory.update", edit)
                words[memory] = word
            elif action == "delete":
                ops.dispatch(store, me, "memory.delete", {"id": f"m{memory}", "revision": current["revision"]})
            elif action == "restore":
                ops.dispatch(store, me, "memory.restore", {"id": f"m{memory}"})
            else:
                ops.dispatch(store, me, "memory.purge", {"id": f"m{memory}"})
                del words[memory]
        except HivememError as exc:
            assert exc.code in ("conflict.memory_revision", "not_found.memory"), exc.code
        live = live_active(store.conn)
        assert indexed(store.conn) == live, f"step {step} ({action})"
        assert found(store, "shared") == live
        for memory, unique in words.items():
            assert found(store, unique) == ({memory} if memory in live else set()), (step, action, memory)
    assert len(words) > 20
    store.close()
