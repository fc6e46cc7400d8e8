"""Kept versions (docs/memories.md): every kept revision reads back with the text it had, newest first, at most
memory.max_versions of them, whatever mix of updates, deletes and restores made them."""

from __future__ import annotations

import random
import tempfile

from hivemem import ops
from hivemem.auth import owner
from hivemem.store import open_store
from hivemem.store.limits import Limits


def test_every_kept_version_reads_back_its_own_text() -> None:
    rng = random.Random(7)
    store = open_store(tempfile.mkdtemp(prefix="hm-ver-") + "/store.db", Limits(max_versions=6))
    me = owner()
    texts: dict[int, dict[int, str]] = {}
    for n in range(1, 6):
        made = ops.dispatch(store, me, "memory.add", {"space": "user", "content": f"memory {n} v1"})
        texts[int(made["id"][1:])] = {1: f"memory {n} v1"}
    for step in range(300):
        memory = rng.choice(list(texts))
        current = ops.dispatch(store, me, "memory.get", {"id": f"m{memory}", "include_deleted": True})
        revision, content = current["revision"], current["content"]
        if "deleted" in current:
            done = ops.dispatch(store, me, "memory.restore", {"id": f"m{memory}"})
        elif rng.random() < 0.25:
            done = ops.dispatch(store, me, "memory.delete", {"id": f"m{memory}", "revision": revision})
        else:
            content = f"memory {memory} step {step} " + "x" * rng.randrange(0, 3000)
            done = ops.dispatch(
                store, me, "memory.update", {"id": f"m{memory}", "revision": revision, "content": content}
            )
        texts[memory][done["revision"]] = content
    for memory, by_revision in texts.items():
        versions = ops.dispatch(store, me, "memory.history", {"id": f"m{memory}"})["versions"]
        kept = [v["revision"] for v in versions]
        newest = max(by_revision)
        assert kept == list(range(newest, max(newest - 6, 0), -1))
        for version in versions:
            at = {"id": f"m{memory}", "revision": version["revision"], "include_deleted": True}
            old = ops.dispatch(store, me, "memory.get", at)
            assert old["content"] == by_revision[version["revision"]], (memory, version["revision"])
            assert version["bytes"] == len(old["content"].encode("utf-8"))
    store.close()
