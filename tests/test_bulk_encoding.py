"""The encodings that bulk writes build from pieces (D202) give the very bytes of the general path: the hash chain
of a batch of events, a version's `meta`, an import's provenance, and the ASCII fast paths of the param checks."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hivemem import params
from hivemem.auth import Principal
from hivemem.store.sqlite import audit, db, memories, transfer

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)  # no lone surrogates
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
DATA = st.none() | st.dictionaries(TEXT, JSON, max_size=4) | st.dictionaries(st.integers(0, 20), JSON, max_size=3)


class Rows:
    """A connection that keeps the rows an append_many writes."""

    dialect = db.DIALECT

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def locked(self, lock: object, sql: str, args: object) -> list[tuple[Any, ...]]:
        return []  # an empty log: the chain starts at ZERO

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self.rows = list(rows)


@settings(max_examples=300, deadline=None)
@given(
    actor=st.tuples(TEXT, st.none() | TEXT),
    events=st.lists(st.tuples(TEXT, st.none() | TEXT, st.none() | st.integers(0, 2**40), st.none() | st.integers(0, 99),
                              st.none() | st.integers(1, 9), DATA), min_size=1, max_size=4),
)  # fmt: skip
def test_a_batch_of_events_chains_as_each_canonical_event_hashes(
    actor: tuple[str, str | None], events: list[Any]
) -> None:
    conn = Rows()
    audit.append_many(conn, Principal(*actor), events)  # type: ignore[arg-type]
    previous = audit.ZERO
    for row in conn.rows:
        previous = audit.link(previous, audit.canonical(row[:10]))
        assert row[10] == previous


def test_imported_event_data_written_from_pieces_is_what_compact_writes() -> None:
    for memory, store in (("m1", "s-1"), ("m22", 'a"b\\é'), ("m3", "\u2028")):
        built = transfer._new_memory({"id": memory, "space": "user", "content": "x"}, b"", None,
                                     transfer.Document(store, [], [], []))[4]  # fmt: skip
        assert built == audit._compact({"original_id": memory, "original_store": store})


@settings(max_examples=300, deadline=None)
@given(
    prov=st.none() | st.dictionaries(TEXT, JSON, max_size=4),
    optional=st.lists(st.none() | TEXT, min_size=4, max_size=4),
    confidence=st.floats(0.0, 1.0),
)
def test_a_version_meta_from_pieces_is_the_general_one(prov: Any, optional: list[Any], confidence: float) -> None:
    f = {"provenance": memories._json(prov), "confidence": confidence, "confidence_state": optional[0],
         "expires_at": optional[1], "review_after": optional[2], "source": optional[3]}  # fmt: skip
    assert memories._meta(f) == memories._meta_of(f)


def test_an_import_provenance_encoded_once_is_the_general_one() -> None:
    rng = random.Random(2)
    for i in range(3000):
        n = rng.choice([0, 1, 5, 40, 60, 80, 120])
        claim = {f"k{j}": ("é" * rng.randint(0, 30)) if rng.random() < 0.5 else rng.randint(0, 10**6) for j in range(n)}
        m = {"id": f"m{i + 1}", "provenance": claim if rng.random() < 0.9 else None,
             "author": rng.choice([{}, {"principal": "g1"}, {"principal": "g1", "label": "cödex"}])}  # fmt: skip
        assert transfer._provenance_text(m, "store-é") == memories._json(transfer.provenance(m, "store-é"))


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=0x180) | st.sampled_from("\u2028\x85\U0001f600"), max_size=20))
def test_the_ascii_paths_of_the_checks_agree_with_the_general_ones(text: str) -> None:
    for allowed in ("", "\t\r\n"):
        general = not text.isprintable() and params._controls(allowed).search(text) is not None
        assert params.has_control(text, allowed) == general
    assert params.nbytes(text) == len(text.encode("utf-8"))
    assert (
        memories.sha256(text)
        == memories.hashlib.sha256(memories.unicodedata.normalize("NFC", text).encode("utf-8")).digest()
    )
    for ascii_text in (json.dumps(text), f" {json.dumps(text)}  x "):  # punctuation, quotes, runs of spaces
        key = " ".join(ascii_text.encode("ascii").translate(memories._ASCII_KEY).decode("ascii").split())
        assert memories.capture_key(ascii_text) == key
