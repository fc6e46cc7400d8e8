"""The derived full-text index holds exactly the live, active memories, with their current text (docs/schema.md).

A random sequence of every verb that touches the index runs in-process on a real store file; after each
step the index is compared with the canonical rows: the set of indexed ids, FTS5's own integrity check
(which re-tokenizes every live, active row: words, CJK bigrams and the space tokens), and searches, in
every space and in each memory's own space (MATCH by space token), for each memory's unique words."""

from __future__ import annotations

import random
import tempfile
from typing import Any

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import Home, wait_for
from hivemem import ops
from hivemem.auth import owner
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from hivemem.store import open_store
from hivemem.store.sqlite import db, fts5, fts_index
from hivemem.store.sqlite import search as fts

SPACES = ("user", *(f"project/{c}" for c in "abcdefghijk"))  # each under 1/8 of the store: MATCH by space token
CJK = "的一是不了人我在有他这中大来上们到说时要就出会也你对生能而子那得于着下"


def live_active(conn: Any) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM memories WHERE deleted IS NULL AND status = 'active'")}


def indexed(conn: Any) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM memory_fts_docsize")}


def found(store: Any, word: str, space: str | None = None) -> set[int]:
    params = {"query": word, "limit": 100, **({"spaces": [space]} if space else {})}
    hits = ops.dispatch(store, owner(), "memory.search", params)["results"]
    return {int(h["id"][1:]) for h in hits}


def unique_words(step: int) -> str:
    """An English word and a two-character CJK word no other step uses (bigrams cross words only within a run)."""
    a, b = divmod(step, len(CJK))
    return f"tok{step}x {CJK[a % len(CJK)]}{CJK[b]}"


def test_the_index_follows_every_change() -> None:
    rng = random.Random(20261130)
    store = open_store(tempfile.mkdtemp(prefix="hm-fts-") + "/store.db")
    me = owner()
    words: dict[int, str] = {}  # memory -> the unique words its current content holds
    space_of: dict[int, str] = {}
    for step in range(400):
        action = rng.choice(["add", "add", "update", "delete", "restore", "purge"])
        ids = list(words)
        word = unique_words(step)
        try:
            if action == "add" or not ids:
                space = rng.choice(SPACES)
                made = ops.dispatch(store, me, "memory.add", {"space": space, "content": f"shared {word}",
                                                               "title": rng.choice(["", f"t {word}"])})  # fmt: skip
                words[int(made["id"][1:])] = word
                space_of[int(made["id"][1:])] = space
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
        assert fts_index.problems(store.conn) == [], f"step {step} ({action})"
        assert found(store, "shared") == live
        for space in SPACES:
            assert found(store, "shared", space) == {m for m in live if space_of[m] == space}
        sample = set(rng.sample(list(words), min(8, len(words))))
        for memory, unique in words.items():
            english, cjk = unique.split()
            want = {memory} if memory in live else set()
            assert found(store, english) == want, (step, action, memory)
            if memory in sample:
                assert found(store, cjk) == found(store, f"{english} {cjk}", space_of[memory]) == want, (step, memory)
    assert len(words) > 20
    assert fts._small(store.conn, ("user",)), "searches in one space must have gone through MATCH by space token"
    store.close()


def segments_of(path: str) -> int:
    """How many segments the store file's memory_fts has, read from a read-only connection of the test's own."""
    conn = db.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        return fts_index.segments(conn)
    finally:
        conn.close()


def test_the_daemon_merges_a_fragmented_index_when_idle_and_every_search_answers_the_same(
    home: Home, owner: DaemonClient
) -> None:
    """Memories written one at a time leave the index in many segments, which every term's lookup visits; once
    the daemon has been idle for a second it merges them into one, in steps, and searches answer exactly as
    before (D190)."""
    queries = ("shared", "apples", "tok5x", "pears 17", "的一")
    for step in range(200):
        owner.call("memory.add", space=SPACES[step % 3], content=f"shared {unique_words(step)} apples {step % 17}")
        if segments_of(home.paths.store) > fts_index.MERGE_FROM_SEGMENTS + 2:
            break
    fragmented = segments_of(home.paths.store)
    assert fragmented > fts_index.MERGE_FROM_SEGMENTS, fragmented
    before = {q: owner.call("memory.search", query=q, spaces=[SPACES[0]], limit=100) for q in queries}
    before["all"] = owner.call("memory.search", query="shared apples", limit=100)
    assert wait_for(lambda: segments_of(home.paths.store) == 1, timeout=30), segments_of(home.paths.store)
    after = {q: owner.call("memory.search", query=q, spaces=[SPACES[0]], limit=100) for q in queries}
    after["all"] = owner.call("memory.search", query="shared apples", limit=100)
    assert after == before
    assert any(r["results"] for r in before.values())
    assert owner.call("store.check")["ok"]


def test_a_merge_step_merges_only_a_fragmented_index() -> None:
    store = open_store(tempfile.mkdtemp(prefix="hm-fts-") + "/store.db")
    me = owner()
    conn = store.conn  # type: ignore[attr-defined]
    ops.dispatch(store, me, "memory.add", {"space": "user", "content": "one lonely memory"})
    assert fts_index.segments(conn) <= fts_index.MERGE_FROM_SEGMENTS
    assert store.search.compact(False) is False  # nothing to merge: nothing written
    for step in range(200):
        ops.dispatch(store, me, "memory.add", {"space": "user", "content": f"memory {unique_words(step)}"})
        if fts_index.segments(conn) > fts_index.MERGE_FROM_SEGMENTS:
            break
    steps = 1
    while store.search.compact(steps > 1):
        steps += 1
        assert steps < 1000
    assert fts_index.segments(conn) == 1
    conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)")  # raises if corrupt
    assert found(store, "memory", "user") == live_active(conn)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=400))
@settings(max_examples=300, deadline=None)
def test_ascii_text_is_counted_as_the_tokenizer_counts_it(text: str) -> None:
    conn = apsw.Connection(":memory:")
    fts5.prepare(conn)
    tokenize = conn.fts5_tokenizer(fts.TOKENIZE[0], list(fts.TOKENIZE[1:]))
    expected = len(list(tokenize(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)))
    assert fts.token_count(text, tokenize) == expected
