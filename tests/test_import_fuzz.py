"""Hostile import documents (docs/operations.md): any change to a valid document is imported whole or refused whole with
`invalid_params.*` and a JSON pointer, never half-written and never a crash. A real store file, in process."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivemem import ops
from hivemem.auth import owner
from hivemem.errors import HivememError
from hivemem.store import SQLiteStore, open_store
from hivemem.store.sqlite.db import scalar

pytestmark = pytest.mark.fault

VALID: dict[str, Any] = {
    "format": "hivemem.export", "version": 1, "store_id": "s-1",
    "memories": [
        {"id": "m1", "space": "user", "content": "first memory", "tags": ["a"], "session": "s1",
         "author": {"principal": "g1", "label": "codex"}},
        {"id": "m2", "space": "project/x", "kind": "fact", "title": "T", "content": "second memory", "tags": [],
         "confidence": 0.5, "status": "draft"},
    ],
    "relations": [{"source": "m1", "target": "m2", "relation": "related"}],
    "sessions": [{"session": "s1", "harness": "codex", "started": "2026-10-01T00:00:00.000Z"}],
}  # fmt: skip

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in a JSON value, as key paths."""
    found = [at]
    if isinstance(value, dict):
        for key, member in value.items():
            found += paths(member, (*at, key))
    elif isinstance(value, list):
        for i, member in enumerate(value):
            found += paths(member, (*at, i))
    return found


LOCATIONS = paths(VALID)[1:]


@pytest.fixture(scope="module")
def store() -> Any:
    directory = tempfile.mkdtemp(prefix="hm-fuzz-")
    opened = open_store(os.path.join(directory, "store.db"))
    yield opened, directory
    opened.close()


def counts(store: SQLiteStore) -> tuple[int, ...]:
    tables = ("memories", "memory_versions", "memory_relations", "sessions", "events")
    return tuple(int(scalar(store.conn, f"SELECT count(*) FROM {t}")) for t in tables)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(LOCATIONS), value=JSON, drop=st.booleans())
def test_a_changed_document_is_imported_whole_or_refused_whole(store: Any, where: tuple[Any, ...], value: Any,
                                                               drop: bool) -> None:  # fmt: skip
    opened, directory = store
    doc = copy.deepcopy(VALID)
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    if drop:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    path = os.path.join(directory, "doc.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    before = counts(opened)
    try:
        result = ops.dispatch(opened, owner(), "store.import", {"path": path})
    except HivememError as exc:
        assert exc.code in ("invalid_params.import", "invalid_params.secret_content"), exc.to_wire()
        assert isinstance(exc.data["at"], str) and (exc.data["at"] == "" or exc.data["at"].startswith("/"))
        assert counts(opened) == before, "nothing half-written"
        return
    assert result["applied"] is True
    added = result["planned"]["add"]
    assert counts(opened)[0] == before[0] + added
