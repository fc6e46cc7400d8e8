"""The import check's plain path (docs/decisions.md D216) accepts only what the rules accept, unchanged.

`transfer_check.plain` lets a large document's ordinary memories skip the general rule machinery; whenever it
says True, `_item` with every rule of MEMORY (the secret scan aside, which the caller runs) must return the
same members without raising. Checked on memories built from valid members and changed to values near every
bound, of the wrong type, non-ASCII or with control characters, and on a real store's export."""

from __future__ import annotations

import json
import os
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hivemem import ops
from hivemem.auth import owner
from hivemem.errors import HivememError
from hivemem.store import open_store
from hivemem.store.transfer_check import MEMORY, _copied, _item, plain

LIMIT = 1000
VALID: dict[str, Any] = {
    "id": "m12",
    "space": "project/api",
    "content": "use pnpm, not npm\n\tsecond line",
    "kind": "decision",
    "title": "Package manager",
    "tags": ["build", "js-tools"],
    "source": "README.md",
    "status": "active",
    "confidence": 0.75,
    "confidence_state": "observed",
    "revision": 3,
    "author": {"principal": "owner", "label": "laptop"},
    "updated_by": {"principal": "g4"},
    "created": "2026-11-01T10:00:00.000Z",
    "updated": "2026-11-02T10:00:00.123Z",
    "deleted": "",
    "review_after": "2027-01-01T00:00:00.000Z",
    "session": "s7",
    "review": "due",
    "embedding": "ready",
}
TRICKY: list[Any] = [
    "", " ", "\n", "m0", "m1\n", "m01", "s1", "s0", "x" * 128, "x" * 129, "x" * 200, "x" * 201, "a" * LIMIT,
    "a" * (LIMIT + 1), "café", "tab\there", "nul\x00", "bell\x07", "del\x7f", "Project/API", "project/", "a/b",
    "2026-11-01T10:00:00Z", "2026-13-01T10:00:00.000Z", "2026-02-30T10:00:00.000Z", "2026-11-01T10:00:00.000Z\n",
    "note", "fact", "draft", "bogus", "due", "off", "pending", "inferred", 0, 1, -1, 2, 0.0, 1.0, 1.5, -0.1,
    float("nan"), float("inf"), True, False, None, 2**63, 2**63 - 1, [], ["a"], ["a", "a"], ["A"], ["a\n"],
    [1], ["-a"], ["x" * 64], ["x" * 65], [f"t{i}" for i in range(17)], {}, {"principal": "owner"},
    {"label": "x"}, {"principal": "p", "label": "l", "x": 1}, {"principal": 5}, {"principal": "é"},
    {"kind": "cli"}, {"principal": "x" * 129},
]  # fmt: skip


def slow(item: Any) -> Any:
    """What the rules make of an item, or the error they raise."""
    try:
        return _item(item, "/memories/0", MEMORY, ("id", "space", "content"), LIMIT, False)
    except HivememError as exc:
        return exc


def agrees(item: Any) -> bool:
    """Whether `plain` said True (and then the rules returned the same copy)."""
    if not plain(item, LIMIT):
        return False
    assert slow(item) == _copied(item), item
    return True


def test_the_valid_memory_is_plain_and_each_single_change_agrees() -> None:
    assert agrees(VALID)
    taken = sum(agrees({**VALID, key: value}) for key in [*MEMORY, "extra"] for value in TRICKY)
    dropped = sum(agrees({k: v for k, v in VALID.items() if k != key}) for key in VALID)
    assert 0 < taken < len(TRICKY) * 8  # most changes are turned away to the rules
    assert dropped == len(VALID) - 3  # id, space and content are required


def test_random_changes_of_several_members_agree() -> None:
    rng = random.Random(20261202)
    keys = [*MEMORY, "extra"]
    for _ in range(20000):
        item = dict(VALID)
        for key in rng.sample(keys, rng.randint(1, 4)):
            item[key] = rng.choice(TRICKY)
        for key in rng.sample(list(VALID), rng.randint(0, 2)):
            item.pop(key, None)
        agrees(item)


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from(list(VALID)), value=st.text(max_size=30) | st.integers() | st.floats())
def test_any_value_of_a_member_agrees(key: str, value: Any) -> None:
    agrees({**VALID, key: value})


def test_a_real_export_is_all_plain(tmp_path: Any) -> None:
    """The plain path is the one an ordinary export's memories take."""
    store = open_store(os.path.join(tmp_path, "store.db"))
    who = owner()
    try:
        for i in range(30):
            params: dict[str, Any] = {"space": f"project/p{i % 3}", "content": f"memory number {i}\nline two"}
            if i % 2:
                params |= {"title": f"title {i}", "tags": ["a", f"t{i}"], "kind": "fact", "confidence": 0.5}
            ops.dispatch(store, who, "memory.add", params)
        path = os.path.join(tmp_path, "out.json")
        ops.dispatch(store, who, "store.export", {"path": path})
    finally:
        store.close()
    with open(path, encoding="utf-8") as f:
        memories = json.load(f)["memories"]
    assert len(memories) == 30 and all(agrees(m) for m in memories)
