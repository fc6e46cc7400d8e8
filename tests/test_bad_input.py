"""Bad input (docs/memories.md, docs/protocol.md, docs/security.md): every bound at the limit and one past it; refusals
write nothing."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Home, isolated_home
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

SECRET = ".".join(("hm1", "owner", base64.urlsafe_b64encode(bytes(range(7, 39))).decode().rstrip("=")))
CLIENT_SECRET = ".".join(("hm1", "g12", base64.urlsafe_b64encode(bytes(range(100, 132))).decode().rstrip("=")))
assert len(SECRET) == len("hm1.owner.") + 43


@pytest.fixture(scope="module")
def client() -> Iterator[DaemonClient]:
    """One home for the whole matrix: each refusal asserts it wrote nothing, so cases cannot affect each other."""
    with isolated_home() as home:
        home.ok("memory", "add", "--space", "user", "--content", "baseline", "--title", "base")
        c = home.client()
        try:
            yield c
        finally:
            c.close()


def snapshot(client: DaemonClient) -> Any:
    """Everything a refused write could have touched; calling it also proves the daemon still serves."""
    counts = {k: v for k, v in client.call("store.status").items() if k != "bytes"}
    memories = client.call("memory.list", include_deleted=True, limit=200)
    return counts, memories, client.call("memory.get", id="m1"), client.call("memory.history", id="m1")


def refused(client: DaemonClient, verb: str, params: dict[str, Any], code: str, param: str | None) -> HivememError:
    before = snapshot(client)
    with pytest.raises(HivememError) as caught:
        client.call(verb, **params)
    assert caught.value.code == code, (params, caught.value.code, caught.value.data)
    if param is not None:
        assert caught.value.data.get("param") == param, caught.value.data
    if code.startswith("invalid_params."):
        assert caught.value.exit_code == 2
    assert snapshot(client) == before
    return caught.value


def prov(**members: Any) -> dict[str, Any]:
    return {"kind": "cli", **members}


def sized_provenance(total: int) -> dict[str, Any]:
    """A provenance object whose compact JSON is exactly `total` bytes; every member within its own bound."""
    value: dict[str, Any] = prov(host='"' * 64, path="p" * 512, thread_id='"' * 128, action='"' * 64, reason="")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    room = total - size
    assert 0 <= room <= 1000, room  # each `"` serializes as two bytes, so reason (<= 500 bytes) can absorb it
    value["reason"] = '"' * (room // 2) + "r" * (room % 2)
    assert len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) == total
    return value


def nested(levels: int, *, objects: bool = False) -> Any:
    """A value `levels` arrays (or objects) deep around a string."""
    value: Any = "x"
    for _ in range(levels):
        value = {"k": value} if objects else [value]
    return value


def add(**params: Any) -> dict[str, Any]:
    return {"space": "user", "content": "fresh text", **params}


def upd(**params: Any) -> dict[str, Any]:
    return {"id": "m1", "revision": 1, **params}


# (verb, params, code, data.param)
REFUSED: list[tuple[str, dict[str, Any], str, str | None]] = [
    # title: <= 200 bytes, no control characters
    ("memory.add", add(title="a" * 201), "invalid_params.range", "title"),
    ("memory.add", add(title="é" * 100 + "a"), "invalid_params.range", "title"),
    ("memory.add", add(title="a\tb"), "invalid_params.title", "title"),
    ("memory.add", add(title="a\nb"), "invalid_params.title", "title"),
    ("memory.add", add(title="a\rb"), "invalid_params.title", "title"),
    ("memory.add", add(title="a\x00b"), "invalid_params.title", "title"),
    ("memory.add", add(title="a\x1bb"), "invalid_params.title", "title"),
    ("memory.add", add(title="a\x7fb"), "invalid_params.title", "title"),
    ("memory.add", add(title="a\x85b"), "invalid_params.title", "title"),
    ("memory.update", upd(title="a" * 201), "invalid_params.range", "title"),
    ("memory.update", upd(title="x\x01"), "invalid_params.title", "title"),
    # content: required, non-empty, <= 65536 bytes, no control characters but tab/CR/LF
    ("memory.add", add(content="a" * 65537), "invalid_params.range", "content"),
    ("memory.add", add(content="€" * 21845 + "ab"), "invalid_params.range", "content"),
    ("memory.add", add(content=""), "invalid_params.content", "content"),
    ("memory.add", add(content="a\x00b"), "invalid_params.content", "content"),
    ("memory.add", add(content="bell\x07"), "invalid_params.content", "content"),
    ("memory.add", add(content="\x1b[31mred"), "invalid_params.content", "content"),
    ("memory.add", add(content="del\x7f"), "invalid_params.content", "content"),
    ("memory.add", add(content="nel\x85"), "invalid_params.content", "content"),
    ("memory.add", add(content="vt\x0b"), "invalid_params.content", "content"),
    ("memory.update", upd(content="a" * 65537), "invalid_params.range", "content"),
    ("memory.update", upd(content=""), "invalid_params.content", "content"),
    ("memory.update", upd(content="a\x00"), "invalid_params.content", "content"),
    # content that is only whitespace, in any script's sense of it
    ("memory.add", add(content=" "), "invalid_params.content", "content"),
    ("memory.add", add(content=" \t\r\n "), "invalid_params.content", "content"),
    ("memory.add", add(content="\u3000\u00a0\u2003\u2028\u2029"), "invalid_params.content", "content"),
    ("memory.update", upd(content="\n\n"), "invalid_params.content", "content"),
    # JSON nested deeper than 32 levels, in any param (even one the verb does not take)
    ("memory.add", add(provenance=nested(33, objects=True)), "invalid_params.depth", "provenance"),
    ("memory.add", add(provenance={"kind": "cli", "host": nested(32)}), "invalid_params.depth", "provenance"),
    ("memory.add", add(tags=nested(33)), "invalid_params.depth", "tags"),
    ("memory.add", add(tags=nested(32)), "invalid_params.type", "tags"),  # 32 levels is within the bound
    ("memory.add", add(content=nested(500)), "invalid_params.depth", "content"),
    ("memory.add", add(bogus=nested(40, objects=True)), "invalid_params.depth", "bogus"),
    ("memory.search", {"query": "x", "spaces": nested(34)}, "invalid_params.depth", "spaces"),
    ("session.start", {"harness": "h", "cwd": nested(33)}, "invalid_params.depth", "cwd"),
    # tags: <= 16, unique, each 1-64 bytes of letters and digits of any script and `-`, NFC, lower case (D280)
    ("memory.add", add(tags=[f"t{i}" for i in range(17)]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["a" * 65]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["Upper"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["-lead"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["under_score"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["sp ace"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=[""]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["Ü"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["cafe\u0301"]), "invalid_params.range", "tags"),  # NFD: not NFC
    ("memory.add", add(tags=["部" * 22]), "invalid_params.range", "tags"),  # 66 bytes
    ("memory.add", add(tags=["部署!"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["\u0301a"]), "invalid_params.range", "tags"),  # starts with a combining mark
    ("memory.add", add(tags=["a.b"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags=["dup", "dup"]), "invalid_params.range", "tags"),
    ("memory.add", add(tags="a"), "invalid_params.type", "tags"),
    ("memory.add", add(tags=[1]), "invalid_params.type", "tags"),
    ("memory.add", add(tags={"a": 1}), "invalid_params.type", "tags"),
    ("memory.update", upd(tags=["BAD"]), "invalid_params.range", "tags"),
    ("memory.list", {"tags": ["BAD"]}, "invalid_params.range", "tags"),
    # source: <= 128 bytes
    ("memory.add", add(source="s" * 129), "invalid_params.range", "source"),
    ("memory.add", add(source="é" * 64 + "s"), "invalid_params.range", "source"),
    ("memory.add", add(source=5), "invalid_params.type", "source"),
    # provenance: <= 2048 bytes serialized, known members only, each within its bound
    ("memory.add", add(provenance=sized_provenance(2049)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance={"host": "codex"}), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance={"kind": "telepathy"}), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(host="h" * 65)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(host=5)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(surface="fax")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="p" * 513)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="/etc/passwd")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="a/../b")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="..")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="../up")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="a\x00b")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path="a\nb")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(path=["a"])), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(line=0)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(line=-3)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(line="3")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(line=1.5)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(line=True)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(thread_id="t" * 129)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(action="a" * 65)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(reason="r" * 501)), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(color="blue")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(original_store="x")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(original_id="m1")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance=prov(original_author="owner")), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance={"kind": "import", "original_id": "m1"}), "invalid_params.provenance", "provenance"),
    # provenance without kind (docs/memories.md)
    ("memory.add", add(provenance={"path": "a.py", "line": 3}), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance={"kind": None, "host": "codex"}), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance={"kind": ""}), "invalid_params.provenance", "provenance"),
    ("memory.update", upd(provenance={"host": "codex"}), "invalid_params.provenance", "provenance"),
    ("memory.add", add(provenance="cli"), "invalid_params.type", "provenance"),
    ("memory.add", add(provenance=["cli"]), "invalid_params.type", "provenance"),
    ("memory.update", upd(provenance=prov(line=0)), "invalid_params.provenance", "provenance"),
    # space: the grammar of docs/memories.md, at most 128 bytes
    ("memory.add", add(space="a" * 129), "invalid_params.space", "space"),
    ("memory.add", add(space="User"), "invalid_params.space", "space"),
    ("memory.add", add(space="/lead"), "invalid_params.space", "space"),
    ("memory.add", add(space="trail/"), "invalid_params.space", "space"),
    ("memory.add", add(space="a//b"), "invalid_params.space", "space"),
    ("memory.add", add(space="-a"), "invalid_params.space", "space"),
    ("memory.add", add(space=".a"), "invalid_params.space", "space"),
    ("memory.add", add(space="_a"), "invalid_params.space", "space"),
    ("memory.add", add(space="a/.b"), "invalid_params.space", "space"),
    ("memory.add", add(space="a b"), "invalid_params.space", "space"),
    ("memory.add", add(space="ü"), "invalid_params.space", "space"),
    ("memory.add", add(space=""), "invalid_params.space", "space"),
    ("memory.add", add(space="@project"), "invalid_params.space", "space"),
    ("memory.add", add(space="a\nb"), "invalid_params.space", "space"),
    ("memory.search", {"query": "x", "spaces": ["Bad"]}, "invalid_params.space", "spaces"),
    ("memory.forget", {"spaces": ["a//b"]}, "invalid_params.space", "spaces"),
    # confidence 0..1, enums, timestamps, ids
    ("memory.add", add(confidence=-0.01), "invalid_params.range", "confidence"),
    ("memory.add", add(confidence=1.01), "invalid_params.range", "confidence"),
    ("memory.add", add(confidence=2), "invalid_params.range", "confidence"),
    ("memory.add", add(confidence="0.5"), "invalid_params.type", "confidence"),
    ("memory.add", add(confidence=True), "invalid_params.type", "confidence"),
    ("memory.update", upd(confidence=1.5), "invalid_params.range", "confidence"),
    ("memory.add", add(kind="rumour"), "invalid_params.range", "kind"),
    ("memory.add", add(confidence_state="sure"), "invalid_params.range", "confidence_state"),
    ("memory.add", add(review_after="tomorrow"), "invalid_params.type", "review_after"),
    ("memory.add", add(expires_at="2030-13-01T00:00:00Z"), "invalid_params.type", "expires_at"),
    ("memory.add", add(session="42"), "invalid_params.type", "session"),
    ("memory.get", {"id": "m0"}, "invalid_params.type", "id"),
    ("memory.get", {"id": "1"}, "invalid_params.type", "id"),
    ("memory.get", {"id": 1}, "invalid_params.type", "id"),
    ("memory.get", {"id": "m1", "include_deleted": 1}, "invalid_params.type", "include_deleted"),
    ("memory.get", {"id": "m1", "revision": 0}, "invalid_params.range", "revision"),
    # revision: an integer >= 1
    ("memory.update", upd(revision=0, content="x"), "invalid_params.range", "revision"),
    ("memory.update", upd(revision=-1, content="x"), "invalid_params.range", "revision"),
    ("memory.update", upd(revision="1", content="x"), "invalid_params.type", "revision"),
    ("memory.update", upd(revision=1.5, content="x"), "invalid_params.type", "revision"),
    ("memory.update", upd(revision=True, content="x"), "invalid_params.type", "revision"),
    ("memory.delete", {"id": "m1", "revision": 0}, "invalid_params.range", "revision"),
    # unknown and missing params
    ("memory.add", add(bogus=1), "invalid_params.unknown", "bogus"),
    ("memory.add", add(Space="user"), "invalid_params.unknown", "Space"),
    ("memory.update", upd(space="elsewhere"), "invalid_params.unknown", "space"),
    ("memory.search", {"query": "x", "q": "y"}, "invalid_params.unknown", "q"),
    ("store.status", {"verbose": True}, "invalid_params.unknown", "verbose"),
    ("memory.add", {"space": "user"}, "invalid_params.missing", "content"),
    ("memory.add", {"content": "text"}, "invalid_params.missing", "space"),
    ("memory.update", {"id": "m1", "content": "x"}, "invalid_params.missing", "revision"),
    ("memory.update", {"revision": 1, "content": "x"}, "invalid_params.missing", "id"),
    ("memory.delete", {"id": "m1"}, "invalid_params.missing", "revision"),
    ("memory.search", {}, "invalid_params.missing", "query"),
    ("memory.forget", {}, "invalid_params.missing", "spaces"),
    # wrong types
    ("memory.add", add(space=1), "invalid_params.type", "space"),
    ("memory.add", add(content=5), "invalid_params.type", "content"),
    ("memory.add", add(content=["a"]), "invalid_params.type", "content"),
    ("memory.add", add(title=5), "invalid_params.type", "title"),
    ("memory.list", {"limit": "5"}, "invalid_params.type", "limit"),
    ("memory.list", {"limit": 5.0}, "invalid_params.type", "limit"),
    ("memory.list", {"limit": 0}, "invalid_params.range", "limit"),
    ("memory.list", {"limit": 201}, "invalid_params.range", "limit"),
    ("memory.list", {"after": "x"}, "invalid_params.type", "after"),
    ("memory.list", {"spaces": "user"}, "invalid_params.type", "spaces"),
    ("memory.list", {"status": "gone"}, "invalid_params.range", "status"),
    ("memory.forget", {"spaces": ["user"], "dry_run": "yes"}, "invalid_params.type", "dry_run"),
    # lone surrogates travel as JSON escapes (the client writes ASCII-only JSON)
    ("memory.add", add(content="a\ud800b"), "invalid_params.encoding", "content"),
    ("memory.add", add(content="\udfff"), "invalid_params.encoding", "content"),
    ("memory.add", add(title="t\udc80"), "invalid_params.encoding", "title"),
    ("memory.add", add(tags=["\ud800"]), "invalid_params.encoding", "tags"),
    ("memory.add", add(space="\ud800"), "invalid_params.encoding", "space"),
    ("memory.add", add(source="\ud800"), "invalid_params.encoding", "source"),
    ("memory.add", add(provenance=prov(host="\ud800")), "invalid_params.encoding", "provenance"),
    ("memory.update", upd(content="\udbff"), "invalid_params.encoding", "content"),
    ("memory.search", {"query": "zebra \ud800"}, "invalid_params.encoding", "query"),
    # secrets are refused and never echoed
    ("memory.add", add(content=f"the key is {SECRET} ok"), "invalid_params.secret_content", "content"),
    ("memory.add", add(content=CLIENT_SECRET), "invalid_params.secret_content", "content"),
    ("memory.add", add(title=f"key {SECRET}"), "invalid_params.secret_content", "title"),
    ("memory.update", upd(content=f"now {SECRET}"), "invalid_params.secret_content", "content"),
    # ... in every stored string (docs/security.md), before any other check of that string
    ("memory.add", add(source=SECRET), "invalid_params.secret_content", "source"),
    ("memory.add", add(source=f"codex:{CLIENT_SECRET}"), "invalid_params.secret_content", "source"),
    ("memory.add", add(tags=["ok", SECRET]), "invalid_params.secret_content", "tags"),
    ("memory.add", add(provenance=prov(host=SECRET)), "invalid_params.secret_content", "provenance"),
    ("memory.add", add(provenance=prov(path=f"src/{SECRET}.py")), "invalid_params.secret_content", "provenance"),
    ("memory.add", add(provenance=prov(thread_id=CLIENT_SECRET)), "invalid_params.secret_content", "provenance"),
    ("memory.add", add(provenance=prov(action=SECRET)), "invalid_params.secret_content", "provenance"),
    ("memory.add", add(provenance=prov(reason=f"saw {SECRET}")), "invalid_params.secret_content", "provenance"),
    ("memory.add", add(provenance={"kind": SECRET}), "invalid_params.secret_content", "provenance"),
    ("memory.add", add(provenance={"kind": "cli", SECRET: "x"}), "invalid_params.secret_content", "provenance"),
    ("memory.update", upd(source=SECRET), "invalid_params.secret_content", "source"),
    ("memory.update", upd(tags=[CLIENT_SECRET]), "invalid_params.secret_content", "tags"),
    ("memory.update", upd(title=CLIENT_SECRET), "invalid_params.secret_content", "title"),
    ("memory.update", upd(provenance=prov(host=SECRET)), "invalid_params.secret_content", "provenance"),
    ("session.start", {"harness": SECRET}, "invalid_params.secret_content", "harness"),
    (
        "session.start",
        {"harness": "h", "harness_session": f"id-{SECRET}"},
        "invalid_params.secret_content",
        "harness_session",
    ),
    ("session.start", {"harness": "h", "cwd": f"/home/u/{CLIENT_SECRET}"}, "invalid_params.secret_content", "cwd"),
]


def _case_id(case: tuple[str, dict[str, Any], str, str | None]) -> str:
    verb, _params, code, param = case
    return f"{verb}-{param}-{code.partition('.')[2]}"


@pytest.mark.parametrize(("verb", "params", "code", "param"), REFUSED, ids=[_case_id(c) for c in REFUSED])
def test_refused_and_nothing_written(
    client: DaemonClient, verb: str, params: dict[str, Any], code: str, param: str | None
) -> None:
    error = refused(client, verb, params, code, param)
    if code == "invalid_params.secret_content":
        assert error.data["kind"]
        assert set(error.data) == {"param", "kind"}
        assert "hm1." not in error.message and SECRET[10:] not in json.dumps(error.data)


def test_ordinary_strings_in_scanned_params_are_stored(client: DaemonClient) -> None:
    """The same fields with a near miss (one character short of a token) are stored as given."""
    near = SECRET[:-1]
    memory = client.call("memory.add", space="user", content="near misses everywhere", source=near, title=near,
                         provenance=prov(host=near, thread_id=near, action=near, reason=near))["id"]  # fmt: skip
    got = client.call("memory.get", id=memory)
    assert (got["source"], got["title"], got["provenance"]["reason"]) == (near, near, near)
    session = client.call("session.start", harness=near[:64], harness_session=near, cwd=f"/home/{near}")
    assert client.call("session.get", session=session["session"])["cwd"] == f"/home/{near}"


def test_duplicates_compare_nfc_forms_and_text_is_stored_as_given(client: DaemonClient) -> None:
    composed, decomposed = "Caf\u00e9 au lait, s\u00e9ance", "Cafe\u0301 au lait, se\u0301ance"
    first = client.call("memory.add", space="nfc/a", content=decomposed)
    again = client.call("memory.add", space="nfc/a", content=composed)
    assert (again["id"], again["changed"]) == (first["id"], False)
    assert client.call("memory.get", id=first["id"])["content"] == decomposed  # stored as given, not normalized
    other = client.call("memory.add", space="nfc/b", content=composed)  # another space: another memory
    assert other["changed"] is True and client.call("memory.get", id=other["id"])["content"] == composed
    plain = client.call("memory.add", space="nfc/a", content="something else")
    error = refused(client, "memory.update", {"id": plain["id"], "revision": 1, "content": composed},
                    "conflict.memory_duplicate", None)  # fmt: skip
    assert error.data["id"] == first["id"]
    client.call("memory.delete", id=first["id"], revision=1)
    replacement = client.call("memory.add", space="nfc/a", content=composed)
    assert replacement["changed"] is True
    error = refused(client, "memory.restore", {"id": first["id"]}, "conflict.memory_duplicate", None)
    assert error.data["id"] == replacement["id"]


WIDE_TAGS = ["部" * 21, "デプロイ", "배포", "café", "ü", "हिन्दी"]  # 63 bytes of Han: within the 64 (D280)
# (params, field to read back, expected stored value) at exactly the limit
ACCEPTED: list[tuple[dict[str, Any], str, Any]] = [
    ({"title": "a" * 200}, "title", "a" * 200),
    ({"title": "é" * 100}, "title", "é" * 100),
    ({"content": "a" * 65536}, "content", "a" * 65536),
    ({"content": "€" * 21845 + "a"}, "content", "€" * 21845 + "a"),
    ({"content": "tab\there\r\nnew\nline"}, "content", "tab\there\r\nnew\nline"),
    ({"content": "emoji 😀 pair"}, "content", "emoji 😀 pair"),
    ({"content": "\u2028\u2029 separators"}, "content", "\u2028\u2029 separators"),
    ({"tags": [f"t{i}" for i in range(16)]}, "tags", [f"t{i}" for i in range(16)]),
    ({"tags": ["a" * 64, "0", "a-b-"]}, "tags", ["a" * 64, "0", "a-b-"]),
    ({"tags": WIDE_TAGS}, "tags", WIDE_TAGS),
    ({"source": "s" * 128}, "source", "s" * 128),
    ({"source": "é" * 64}, "source", "é" * 64),
    ({"provenance": sized_provenance(2048)}, "provenance", sized_provenance(2048)),
    ({"provenance": prov(host="h" * 64, thread_id="t" * 128, action="a" * 64)}, "provenance",
     prov(host="h" * 64, thread_id="t" * 128, action="a" * 64)),
    ({"provenance": prov(path="p" * 512, line=1)}, "provenance", prov(path="p" * 512, line=1)),
    ({"provenance": prov(path="src/a..b/c.py", line=10**12)}, "provenance", prov(path="src/a..b/c.py", line=10**12)),
    ({"provenance": prov(reason="r" * 500, surface="web")}, "provenance", prov(reason="r" * 500, surface="web")),
    ({"provenance": {"kind": "conversation"}}, "provenance", {"kind": "conversation"}),
    ({"space": "a" * 128}, "space", "a" * 128),
    ({"space": "a/b.c_d-e/0"}, "space", "a/b.c_d-e/0"),
    ({"confidence": 0}, "confidence", 0.0),
    ({"confidence": 1}, "confidence", 1.0),
    ({"content": "almost " + SECRET[:-1]}, "content", "almost " + SECRET[:-1]),
    ({"content": "my password policy says rotate keys often"}, "content", "my password policy says rotate keys often"),
]  # fmt: skip


@pytest.mark.parametrize(("params", "field", "stored"), ACCEPTED, ids=[f"{c[1]}-{i}" for i, c in enumerate(ACCEPTED)])
def test_at_the_limit_is_accepted(client: DaemonClient, params: dict[str, Any], field: str, stored: Any) -> None:
    content = f"accepted at the limit: {sorted(params)} {json.dumps(params)[:300]}"  # unique in the shared home
    result = client.call("memory.add", **{"space": "user", "content": content, **params})
    assert result["changed"] is True
    assert client.call("memory.get", id=result["id"])[field] == stored


def test_every_kind_and_provenance_kind_is_accepted(client: DaemonClient) -> None:
    kinds = ("note", "fact", "decision", "procedure", "preference", "convention", "task", "lesson")
    sources = ("conversation", "file", "import", "cli", "mcp", "hook")
    for i, (kind, source) in enumerate(zip(kinds, sources * 2, strict=False)):
        memory = client.call("memory.add", space="user", content=f"k{i}", kind=kind, provenance={"kind": source})["id"]
        got = client.call("memory.get", id=memory)
        assert (got["kind"], got["provenance"]["kind"]) == (kind, source)


def test_params_are_validated_before_authorization(home: Home) -> None:
    result = home.cli("memory", "add", "--space", "Bad Space", "--content", "x", "--json", token=None)
    assert result.code == 2
    assert result.json["error"]["code"] == "invalid_params.space"


# Configured content bound, and the largest allowed one through the wire.


def test_configured_smaller_max_content_bytes(home: Home) -> None:
    home.config("[memory]\nmax_content_bytes = 100\n")
    assert home.ok("memory", "add", "--space", "user", "--content", "a" * 100)["changed"] is True
    before = home.ok("store", "status")
    result = home.cli("memory", "add", "--space", "user", "--content", "b" * 101, "--json")
    assert result.code == 2
    assert result.json["error"]["code"] == "invalid_params.range"
    assert result.json["error"]["data"]["param"] == "content"
    result = home.cli("memory", "update", "--id", "m1", "--revision", "1", "--content", "c" * 101, "--json")
    assert (result.code, result.json["error"]["code"]) == (2, "invalid_params.range")
    assert home.ok("store", "status") == before


def test_largest_configured_content_fits_through_the_wire(home: Home) -> None:
    home.config("[memory]\nmax_content_bytes = 262144\n")
    home.ok("whoami")
    biggest = "😀" * 65536  # 262144 bytes; escaped on the wire as 786432 ASCII characters
    client = home.client()
    try:
        memory = client.call("memory.add", space="user", content=biggest)["id"]
        assert client.call("memory.get", id=memory)["content"] == biggest
        with pytest.raises(HivememError) as caught:
            client.call("memory.add", space="user", content=biggest + "a")
        assert caught.value.code == "invalid_params.range"
        assert client.call("store.status")["memories"] == 1
    finally:
        client.close()


# The same refusals through the real CLI: exit 2, the error object on stdout, nothing written.

CLI_REFUSED: list[tuple[tuple[str, ...], bytes | None, str, str | None]] = [
    (("--content", "x", "--title", "t" * 201), None, "invalid_params.range", "title"),
    (("--content", "-"), b"a" * 65537, "invalid_params.range", "content"),
    (("--content", "bad\udcffbyte"), None, "invalid_params.encoding", "content"),
    (("--content", "x", "--title", "\udcc3("), None, "invalid_params.encoding", "title"),
    (("--content", "-"), b"caf\xe9 latin-1\n", "invalid_params.encoding", "content"),
    (("--content", "-"), b"\xff\xfe", "invalid_params.encoding", "content"),
    (("--content", "-"), b"nul\x00inside", "invalid_params.content", "content"),
    (("--content", "-"), b"\n", "invalid_params.content", "content"),
    (("--content", "x", "--tags", "ok,Not-Ok"), None, "invalid_params.range", "tags"),
    (("--content", "x", "--confidence", "1.5"), None, "invalid_params.range", "confidence"),
    (("--content", "x", "--confidence", "high"), None, "invalid_params.type", "confidence"),
    (("--content", "x", "--provenance", "{not json"), None, "invalid_params.type", "provenance"),
    (("--content", "x", "--provenance", '{"kind":"cli","path":"/abs"}'), None, "invalid_params.provenance",
     "provenance"),
    (("--content", "x", "--provenance", '{"host":"codex"}'), None, "invalid_params.provenance", "provenance"),
    (("--content", "x", "--provenance", "[" * 33 + "]" * 33), None, "invalid_params.depth", "provenance"),
    (("--content", "x", "--provenance", "[" * 20000 + "]" * 20000), None, "invalid_params.depth", "provenance"),
    (("--content", "x", "--tags", "[" * 40 + "]" * 40), None, "invalid_params.depth", "tags"),
    (("--content", " \t "), None, "invalid_params.content", "content"),
    (("--content", "-"), b"\n\n \n", "invalid_params.content", "content"),
    (("--content", "x", "--source", SECRET), None, "invalid_params.secret_content", "source"),
    (("--content", "x", "--tags", f"ok,{SECRET}"), None, "invalid_params.secret_content", "tags"),
    (("--content", f"leak {SECRET}"), None, "invalid_params.secret_content", "content"),
    (("--content", "-"), f"piped {SECRET}\n".encode(), "invalid_params.secret_content", "content"),
    ((), None, "invalid_params.missing", "content"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "stdin", "code", "param"), CLI_REFUSED,
                         ids=[f"{c[2].partition('.')[2]}-{i}" for i, c in enumerate(CLI_REFUSED)])  # fmt: skip
def test_cli_refusals_exit_2_and_write_nothing(
    home: Home, args: tuple[str, ...], stdin: bytes | None, code: str, param: str | None
) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "baseline")
    before = home.ok("store", "status")
    result = home.cli("memory", "add", "--space", "user", *args, "--json", stdin=stdin)
    assert result.code == 2, result
    assert result.json["error"]["code"] == code
    assert result.json["error"]["data"].get("param") == param
    assert SECRET not in result.out + result.err
    assert home.ok("store", "status") == before
    assert home.cli("ping").code == 0
    human = home.cli("memory", "add", "--space", "user", *args, stdin=stdin)
    assert human.code == 2
    assert code in human.err
    assert SECRET not in human.out + human.err
    assert home.ok("store", "status") == before


def test_bad_space_through_the_cli(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "baseline")
    before = home.ok("store", "status")
    for space in ("Bad Space", "a" * 129, "x//y", "@nonsense"):
        result = home.cli("memory", "add", "--space", space, "--content", "x", "--json")
        assert result.code == 2, (space, result)
        assert result.json["error"]["code"] == "invalid_params.space"
        assert result.json["error"]["data"]["param"] == "space"
    assert home.ok("store", "status") == before


def test_unknown_flag_is_an_unknown_param(home: Home) -> None:
    """docs/protocol.md: an unknown param is invalid_params.unknown with data.param, on the CLI as on the wire."""
    result = home.cli("memory", "add", "--space", "user", "--content", "x", "--colour", "red", "--json")
    assert result.code == 2
    assert result.json["error"]["code"] == "invalid_params.unknown"
    assert result.json["error"]["data"]["param"] == "colour"
    assert home.ok("store", "status")["memories"] == 0


def test_a_million_levels_from_a_file_is_a_depth_error_not_a_traceback(home: Home) -> None:
    path = os.path.join(home.base, "deep.json")
    with open(path, "w") as f:
        f.write("[" * 1_000_000 + "]" * 1_000_000)  # 2 MB: under the 4 MiB bound of a value read from a file
    home.ok("memory", "add", "--space", "user", "--content", "baseline")
    before = home.ok("store", "status")
    for flag in ("--provenance", "--tags"):
        result = home.cli("memory", "add", "--space", "user", "--content", "x", flag, f"@{path}", "--json")
        assert (result.code, result.json["error"]["code"]) == (2, "invalid_params.depth"), result
        assert result.json["error"]["data"]["param"] == flag[2:]
        assert "Traceback" not in result.err
    assert home.ok("store", "status") == before
