"""Governance (docs/governance.md; conformance C12): capture and confirm, review, challenge, archive, relations, move
and the audit trail, through the real CLI, a real daemon on its socket and real MCP sessions."""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timedelta
from typing import Any

import anyio
import pytest

from conftest import Clients, Home, client_token, fails, mcp_session, raises, wait_for
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from hivemem.store.sqlite import db
from hivemem.store.sqlite.integrity import events_chain
from secret_corpus import research_samples

SPACE = "project/gov"


def events(client: DaemonClient, ident: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.call("memory.audit", id=ident, limit=1000)["events"]
    return found


def event_count(client: DaemonClient) -> int:
    return len(client.call("events.list", limit=1000)["events"])


def add(client: DaemonClient, content: str, **kw: Any) -> str:
    ident: str = client.call("memory.add", space=kw.pop("space", SPACE), content=content, **kw)["id"]
    return ident


def searched(client: DaemonClient, query: str) -> list[str]:
    return [h["id"] for h in client.call("memory.search", query=query, spaces=[SPACE])["results"]]


def recalled(client: DaemonClient, query: str) -> str:
    text: str = client.call("memory.recall", spaces=[SPACE], query=query)["text"]
    return text


# Capture and confirm (docs/governance.md)


def test_capture_makes_a_draft_that_is_neither_searched_nor_recalled_until_confirmed(
    home: Home, owner: DaemonClient
) -> None:
    out = home.ok("memory", "capture", "--space", SPACE, "--content", "integration tests need the zebra fixture")
    assert out == {"id": out["id"], "revision": 1, "status": "draft", "changed": True, "related": [],
                   "exhaustive": True, "independent": True}  # fmt: skip
    draft = owner.call("memory.get", id=out["id"])
    assert draft["status"] == "draft" and draft["confidence"] == 0.7 and draft["confidence_state"] == "inferred"
    assert searched(owner, "zebra fixture") == [] and recalled(owner, "zebra fixture") == ""
    assert owner.call("memory.list", spaces=[SPACE])["memories"] == []
    assert [m["id"] for m in owner.call("memory.list", spaces=[SPACE], status="draft")["memories"]] == [out["id"]]
    assert owner.call("store.status")["drafts"] == 1

    done = home.ok("memory", "confirm", "--id", out["id"], "--revision", "1", "--tags", "testing")
    assert done == {"id": out["id"], "revision": 2, "changed": True}
    active = owner.call("memory.get", id=out["id"])
    assert (active["status"], active["confidence"], active["confidence_state"]) == ("active", 1.0, "user_confirmed")
    assert active["tags"] == ["testing"]
    assert searched(owner, "zebra fixture") == [out["id"]] and "zebra fixture" in recalled(owner, "zebra fixture")
    assert [e["type"] for e in events(owner, out["id"])] == ["memory.confirmed", "memory.captured"]
    assert events(owner, out["id"])[0]["data"] == {"fields": ["tags"]}
    assert owner.call("memory.history", id=out["id"])["versions"][0]["action"] == "confirm"


def test_exact_duplicates_by_capture_key_write_nothing_whatever_their_status(home: Home, owner: DaemonClient) -> None:
    first = add(owner, "Deploys go through `make release`.")
    before = event_count(owner)
    again = owner.call("memory.capture", space=SPACE, content="deploys   go through make-release")
    assert again == {"duplicate_of": first, "changed": False, "related": [], "exhaustive": True}
    assert event_count(owner) == before
    draft = owner.call("memory.capture", space=SPACE, content="the staging database is reset nightly")["id"]
    assert owner.call("memory.capture", space=SPACE, content="The staging database is reset, nightly!") == {
        "duplicate_of": draft, "changed": False, "related": [], "exhaustive": True}  # fmt: skip
    owner.call("memory.archive", id=first, revision=1)
    assert owner.call("memory.capture", space=SPACE, content="DEPLOYS go through make release")["duplicate_of"] == first
    other = owner.call("memory.capture", space="project/other", content="deploys go through make release")
    assert other["status"] == "draft", "capture keys are compared within one space"


def test_related_memories_and_the_exhaustive_rule_at_100_and_101(home: Home, owner: DaemonClient) -> None:
    near = add(owner, "the build cache lives in the shared volume on ci")
    for n in range(99):
        add(owner, f"unrelated note number {n} about gardening")
    found = owner.call("memory.capture", space=SPACE, content="the build cache lives in the shared volume")
    assert found["related"] == [{"id": near, "similarity": pytest.approx(7 / 9, abs=1e-4)}]
    assert found["exhaustive"] is True and found["independent"] is False
    alone = owner.call("memory.capture", space=SPACE, content="quokkas prefer the night shift")
    assert (alone["related"], alone["exhaustive"], alone["independent"]) == ([], True, True)

    add(owner, "one more active memory makes the space larger than 100")  # 101 active memories
    big = owner.call("memory.capture", space=SPACE, content="the build cache lives on the shared ci volume")
    assert big["exhaustive"] is False and big["independent"] is False
    assert [r["id"] for r in big["related"]] == [near], "FTS candidates still find the related memory"
    nothing = owner.call("memory.capture", space=SPACE, content="axolotls regrow their limbs")
    assert (nothing["related"], nothing["exhaustive"], nothing["independent"]) == ([], False, False)


def test_confirming_an_active_memory_is_refused_and_a_stale_revision_conflicts(home: Home, owner: DaemonClient) -> None:
    active = add(owner, "already active")
    error = fails(home, "memory", "confirm", "--id", active, "--revision", "1", code="conflict.memory_status",
                  exit_code=5)  # fmt: skip
    assert error["data"] == {"id": active, "status": "active"}
    draft = owner.call("memory.capture", space=SPACE, content="a draft to confirm twice")["id"]
    fails(home, "memory", "confirm", "--id", draft, "--revision", "2", code="conflict.memory_revision", exit_code=5)
    owner.call("memory.capture", space=SPACE, content="text that another memory holds")
    dup = add(owner, "the edited text")
    error = fails(home, "memory", "confirm", "--id", draft, "--revision", "1", "--content", "the edited text",
                  code="conflict.memory_duplicate", exit_code=5)  # fmt: skip
    assert error["data"]["id"] == dup


# Review (docs/governance.md)


def test_review_lists_due_and_expired_oldest_first_and_says_why(home: Home, owner: DaemonClient) -> None:
    due = add(owner, "due since 2021", review_after="2021-01-01T00:00:00Z")
    expired = add(owner, "expired since 2020", expires_at="2020-06-01T00:00:00Z")
    add(owner, "not due before 2999", review_after="2999-01-01T00:00:00Z")
    flagged = add(owner, "flagged for a second look")
    owner.call("memory.challenge", id=flagged, revision=1, outcome="needs_review")
    decision = owner.call("memory.get", id=add(owner, "we chose sqlite", kind="decision"))
    assert decision["review_after"] > decision["created"], "a decision gets the kind's default review period"
    listed = owner.call("memory.review", spaces=[SPACE])
    assert [(m["id"], m["review"]) for m in listed["memories"]] == [(expired, "expired"), (due, "due"),
                                                                   (flagged, "due")]  # fmt: skip
    assert "content" not in listed["memories"][0] and listed["memories"][0]["snippet"] == "expired since 2020"
    first = owner.call("memory.review", spaces=[SPACE], limit=1)
    assert first["next"] == expired
    assert [m["id"] for m in owner.call("memory.review", spaces=[SPACE], after=expired)["memories"]] == [due, flagged]
    text = home.cli("memory", "review", "--spaces", SPACE).out
    assert "REVIEW" in text and "expired 2020-06-01T00:00:00.000Z" in text and "due 2021-01-01T00:00:00.000Z" in text
    assert "due: needs_review" in text
    assert owner.call("memory.get", id=expired)["status"] == "active", "review never archives by itself"
    assert '"review":"expired"' in recalled(owner, "expired since 2020")


def at(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")


def test_the_kinds_default_review_periods_and_an_explicit_review_after_wins(home: Home, owner: DaemonClient) -> None:
    decision = owner.call("memory.get", id=add(owner, "we chose sqlite for the store", kind="decision"))
    assert at(decision["review_after"]) - at(decision["created"]) == timedelta(days=180)
    task = owner.call("memory.get", id=add(owner, "half way through the migration", kind="task"))
    assert at(task["review_after"]) - at(task["created"]) == timedelta(days=7)
    captured = owner.call("memory.capture", space=SPACE, content="the export step is next", kind="task")["id"]
    drafted = owner.call("memory.get", id=captured)
    assert at(drafted["review_after"]) - at(drafted["created"]) == timedelta(days=7), "capture applies it too"
    for kind in ("note", "fact", "procedure", "preference", "convention", "lesson"):
        assert "review_after" not in owner.call("memory.get", id=add(owner, f"a {kind} with no period", kind=kind))
    chosen = add(owner, "we chose python", kind="decision", review_after="2030-01-01T00:00:00Z")
    assert owner.call("memory.get", id=chosen)["review_after"] == "2030-01-01T00:00:00.000Z"
    cli = home.ok("memory", "add", "--space", SPACE, "--kind", "task", "--content", "the cli task",
                  "--review-after", "2029-05-05T00:00:00Z")  # fmt: skip
    assert owner.call("memory.get", id=cli["id"])["review_after"] == "2029-05-05T00:00:00.000Z"


def test_update_sets_and_clears_confidence_its_state_review_and_expiry(home: Home, owner: DaemonClient) -> None:
    ident = add(owner, "the cache is warmed at boot")
    done = home.ok("memory", "update", "--id", ident, "--revision", "1", "--confidence", "0.4",
                   "--confidence-state", "observed", "--review-after", "2021-01-01T00:00:00Z",
                   "--expires-at", "2999-01-01T00:00:00Z")  # fmt: skip
    assert done == {"id": ident, "revision": 2, "changed": True}
    got = owner.call("memory.get", id=ident)
    assert (got["confidence"], got["confidence_state"]) == (0.4, "observed")
    assert (got["review_after"], got["expires_at"], got["review"]) == (
        "2021-01-01T00:00:00.000Z", "2999-01-01T00:00:00.000Z", "due")  # fmt: skip
    assert events(owner, ident)[0]["data"] == {
        "fields": ["confidence", "confidence_state", "expires_at", "review_after"]}  # fmt: skip
    assert [m["id"] for m in owner.call("memory.review", spaces=[SPACE])["memories"]] == [ident]
    owner.call("memory.update", id=ident, revision=2, expires_at="2020-01-01T00:00:00Z", confidence_state="inferred")
    assert owner.call("memory.get", id=ident)["review"] == "expired"
    owner.call("memory.update", id=ident, revision=3, review_after="", expires_at="", confidence=1.0)
    cleared = owner.call("memory.get", id=ident)
    assert not {"review_after", "expires_at", "review"} & cleared.keys() and cleared["confidence"] == 1.0
    assert owner.call("memory.review", spaces=[SPACE])["memories"] == []
    unchanged = owner.call("memory.update", id=ident, revision=4, confidence=1.0, confidence_state="inferred")
    assert unchanged == {"id": ident, "revision": 4, "changed": False}
    for bad in ({"confidence": 1.5}, {"confidence_state": "certain"}, {"review_after": "tomorrow"}):
        assert raises(owner, "memory.update", id=ident, revision=4, **bad).code.startswith("invalid_params.")


# Challenge (docs/governance.md)


@pytest.mark.parametrize("outcome", ["stale", "wrong", "superseded"])
def test_a_destructive_outcome_previews_until_confirmed_then_archives(
    home: Home, owner: DaemonClient, outcome: str
) -> None:
    target = add(owner, "the api listens on port 8080")
    extra = ["--replacement", add(owner, "the api listens on port 9090")] if outcome == "superseded" else []
    before = event_count(owner)
    args = ("memory", "challenge", "--id", target, "--revision", "1", "--outcome", outcome, *extra)
    preview = home.ok(*args)
    assert preview == {"id": target, "revision": 1, "outcome": outcome, "applied": False, "effect": "archive"}
    assert event_count(owner) == before and owner.call("memory.get", id=target)["revision"] == 1
    human = home.cli(*args)
    assert human.code == 0 and "nothing was written" in human.out and "--confirm" in human.out
    applied = home.ok(*args, "--confirm", "--reason", "checked the config")
    assert applied == {"id": target, "revision": 2, "outcome": outcome, "applied": True}
    after = owner.call("memory.get", id=target)
    assert (after["status"], after["confidence_state"]) == ("archived", "deprecated")
    assert after["confidence"] == (0.0 if outcome == "wrong" else 1.0)
    assert searched(owner, "8080") == [] and recalled(owner, "8080") == ""
    [event] = [e for e in events(owner, target) if e["type"] == "memory.challenged"]
    assert event["data"]["outcome"] == outcome and event["data"]["reason"] == "checked the config"
    assert "8080" not in json.dumps(event)
    if outcome == "superseded":
        assert after["relations"] == [{"relation": "supersedes", "source": extra[1], "direction": "in"}]
    restored = owner.call("memory.restore", id=target)
    assert restored == {"id": target, "revision": 3}
    assert owner.call("memory.get", id=target)["status"] == "active"


def test_an_archived_draft_is_restored_as_a_draft_never_active_without_confirm(home: Home, owner: DaemonClient) -> None:
    draft = owner.call("memory.capture", space=SPACE, content="the quokka cache warms at noon")["id"]
    owner.call("memory.archive", id=draft, revision=1)
    assert events(owner, draft)[0]["data"] == {"was": "draft"}
    assert home.ok("memory", "restore", "--id", draft) == {"id": draft, "revision": 3}
    back = owner.call("memory.get", id=draft)
    assert back["status"] == "draft"
    assert searched(owner, "quokka cache") == [] and recalled(owner, "quokka cache") == ""
    assert owner.call("memory.history", id=draft)["versions"][0]["action"] == "restore"

    moved = owner.call("memory.capture", space=SPACE, content="the wombat queue drains hourly")["id"]
    owner.call("memory.archive", id=moved, revision=1)
    elsewhere = owner.call("memory.move", id=moved, revision=2, space="team/y")["id"]
    assert events(owner, elsewhere)[0]["data"] == {"from": moved, "was": "draft"}
    owner.call("memory.restore", id=elsewhere)
    assert owner.call("memory.get", id=elsewhere)["status"] == "draft", "a move keeps what it was before its archive"

    owner.call("memory.confirm", id=draft, revision=3)
    owner.call("memory.archive", id=draft, revision=4)
    owner.call("memory.restore", id=draft)
    assert owner.call("memory.get", id=draft)["status"] == "active", "confirmed before this archive"
    assert searched(owner, "quokka cache") == [draft]


def test_still_valid_and_needs_review_apply_at_once(home: Home, owner: DaemonClient) -> None:
    decision = add(owner, "we use postgres 16", kind="decision", review_after="2020-01-01T00:00:00Z")
    note = add(owner, "a note that was due", review_after="2020-01-01T00:00:00Z")
    assert owner.call("memory.challenge", id=decision, revision=1, outcome="still_valid") == {
        "id": decision, "revision": 2, "outcome": "still_valid", "applied": True}  # fmt: skip
    renewed = owner.call("memory.get", id=decision)
    assert renewed["confidence_state"] == "user_confirmed" and renewed["review_after"] > renewed["updated"]
    assert "review" not in renewed
    owner.call("memory.challenge", id=note, revision=1, outcome="still_valid")
    assert "review_after" not in owner.call("memory.get", id=note), "a kind with no period clears it"
    owner.call("memory.challenge", id=note, revision=2, outcome="needs_review")
    flagged = owner.call("memory.get", id=note)
    assert (flagged["confidence_state"], flagged["review"], flagged["status"]) == ("needs_review", "due", "active")
    assert '"review":"due"' in recalled(owner, "note that was due")


def test_challenge_refusals(home: Home, owner: DaemonClient, clients: Clients) -> None:
    target = add(owner, "challenged memory")
    fails(home, "memory", "challenge", "--id", target, "--revision", "2", "--outcome", "stale", "--confirm",
          code="conflict.memory_revision", exit_code=5)  # fmt: skip
    error = fails(home, "memory", "challenge", "--id", target, "--revision", "1", "--outcome", "superseded",
                  code="invalid_params.missing", exit_code=2)  # fmt: skip
    assert error["data"]["param"] == "replacement"
    archived = add(owner, "an archived replacement")
    owner.call("memory.archive", id=archived, revision=1)
    draft = owner.call("memory.capture", space=SPACE, content="a draft replacement")["id"]
    deleted = add(owner, "a deleted replacement")
    owner.call("memory.delete", id=deleted, revision=1)
    hidden = add(owner, "an unreadable replacement", space="private")
    token = client_token(owner, "limited", [("read", f"space:{SPACE}"), ("write", f"space:{SPACE}")])
    for replacement in (archived, draft, deleted, "m999"):
        err = raises(owner, "memory.challenge", id=target, revision=1, outcome="superseded", replacement=replacement)
        assert err.code == "not_found.memory", replacement
    err = raises(clients(token), "memory.challenge", id=target, revision=1, outcome="superseded", replacement=hidden)
    absent = raises(clients(token), "memory.challenge", id=target, revision=1, outcome="superseded", replacement="m999")
    assert (err.code, err.data) == (absent.code, absent.data)
    assert owner.call("memory.get", id=target)["revision"] == 1, "nothing was written"
    fails(home, "memory", "challenge", "--id", archived, "--revision", "2", "--outcome", "stale",
          code="conflict.memory_status", exit_code=5)  # fmt: skip


def test_a_reason_is_bounded_and_secret_scanned(home: Home, owner: DaemonClient) -> None:
    target = add(owner, "a memory with reasons")
    base = ("memory", "challenge", "--id", target, "--revision", "1", "--outcome", "needs_review", "--reason")
    error = fails(home, *base, "x" * 501, code="invalid_params.range", exit_code=2)
    assert error["data"]["param"] == "reason"
    assert home.ok(*base, "é" * 250)["applied"] is True  # 500 bytes exactly
    secret = research_samples()[1][1]  # a generated personal access token
    result = home.cli("memory", "challenge", "--id", target, "--revision", "2", "--outcome", "still_valid",
                      "--reason", f"see {secret}", "--json")  # fmt: skip
    assert result.code == 2 and result.json["error"]["code"] == "invalid_params.secret_content"
    assert secret not in result.out + result.err
    err = raises(owner, "memory.relate", source=target, target=add(owner, "other end"), relation="related",
                 reason=f"because {secret}")  # fmt: skip
    assert err.code == "invalid_params.secret_content" and secret not in str(err)


def test_a_relation_reason_over_500_bytes_is_refused_and_writes_nothing(home: Home, owner: DaemonClient) -> None:
    source, target = add(owner, "the source end"), add(owner, "the target end")
    before = event_count(owner)
    error = raises(owner, "memory.relate", source=source, target=target, relation="related", reason="é" * 250 + "x")
    assert (error.code, error.data["param"]) == ("invalid_params.range", "reason")
    cli = fails(home, "memory", "relate", "--source", source, "--target", target, "--relation", "related",
                "--reason", "x" * 501, code="invalid_params.range", exit_code=2)  # fmt: skip
    assert cli["data"]["param"] == "reason"
    assert event_count(owner) == before and owner.call("memory.get", id=source)["relations"] == []
    made = owner.call("memory.relate", source=source, target=target, relation="related", reason="é" * 250)
    assert made["changed"] is True, "500 bytes exactly"


# Relations (docs/governance.md)


def test_relations_both_ways_and_never_across_what_the_caller_reads(
    home: Home, owner: DaemonClient, clients: Clients
) -> None:
    old, new = add(owner, "v1 of the runbook"), add(owner, "v2 of the runbook")
    hidden = add(owner, "a private note", space="private")
    assert home.ok("memory", "relate", "--source", new, "--target", old, "--relation", "supersedes") == {
        "source": new, "target": old, "relation": "supersedes", "changed": True}  # fmt: skip
    assert owner.call("memory.relate", source=new, target=old, relation="supersedes")["changed"] is False
    owner.call("memory.relate", source=hidden, target=new, relation="derived_from", reason="copied")
    assert owner.call("memory.get", id=new)["relations"] == [
        {"relation": "supersedes", "target": old, "direction": "out"},
        {"relation": "derived_from", "source": hidden, "direction": "in"},
    ]
    token = client_token(owner, "reader", [("read", f"space:{SPACE}"), ("write", f"space:{SPACE}")])
    reader = clients(token)
    assert reader.call("memory.get", id=new)["relations"] == [
        {"relation": "supersedes", "target": old, "direction": "out"}]  # fmt: skip
    unreadable = raises(reader, "memory.relate", source=new, target=hidden, relation="related")
    absent = raises(reader, "memory.relate", source=new, target="m999", relation="related")
    assert (unreadable.code, unreadable.data) == (absent.code, absent.data) == ("not_found.memory", {})
    assert raises(reader, "memory.relate", source=hidden, target=new, relation="related").code == "not_found.memory"
    assert raises(owner, "memory.relate", source=new, target=new, relation="related").code == "invalid_params.range"
    created = [e for e in events(owner, new) if e["type"] == "relation.created"]
    assert created[0]["data"] == {"target": old, "relation": "supersedes"}
    assert home.ok("memory", "unrelate", "--source", new, "--target", old, "--relation", "supersedes")["changed"]
    assert owner.call("memory.unrelate", source=new, target=old, relation="supersedes")["changed"] is False
    assert events(owner, new)[0]["type"] == "relation.deleted"
    assert owner.call("memory.get", id=old)["relations"] == []


# Move


def test_move_makes_a_new_memory_and_deletes_the_old_in_one_step(home: Home, owner: DaemonClient,
                                                                 clients: Clients) -> None:  # fmt: skip
    writer = client_token(owner, "writer", [("read", "*"), ("write", f"space:{SPACE}")])
    ident = clients(writer).call("memory.add", space=SPACE, content="moved text", kind="fact", tags=["a"])["id"]
    denied = raises(clients(writer), "memory.move", id=ident, revision=1, space="team/x")
    assert denied.code == "denied.write", "write on both spaces"
    moved = home.ok("memory", "move", "--id", ident, "--revision", "1", "--space", "team/x")
    assert moved == {"id": moved["id"], "from": ident, "revision": 1}
    new = owner.call("memory.get", id=moved["id"])
    assert (new["space"], new["kind"], new["tags"], new["content"]) == ("team/x", "fact", ["a"], "moved text")
    assert new["author"]["label"] == "writer" and new["updated_by"]["label"] == "owner"
    assert raises(owner, "memory.get", id=ident).code == "not_found.memory"
    assert [e["type"] for e in events(owner, ident)][:1] == ["memory.moved"]
    assert events(owner, moved["id"])[0]["data"] == {"from": ident}
    back = add(owner, "moved text", space=SPACE)
    error = fails(home, "memory", "move", "--id", back, "--revision", "1", "--space", "team/x",
                  code="conflict.memory_duplicate", exit_code=5)  # fmt: skip
    assert error["data"]["id"] == moved["id"]
    fails(home, "memory", "move", "--id", back, "--revision", "9", "--space", "team/y",
          code="conflict.memory_revision", exit_code=5)  # fmt: skip


def test_an_interrupted_run_of_moves_leaves_each_memory_in_exactly_one_place(home: Home, owner: DaemonClient) -> None:
    total = 300
    for n in range(total):
        add(owner, f"moving memory {n}", space="from")
    pid = home.daemon_pid()
    assert pid is not None
    owner.connect()
    for n in range(1, total + 1):  # pipelined: the daemon is killed while it works through them
        owner._next_id += 1
        owner.send({"id": owner._next_id, "verb": "memory.move",
                    "params": {"id": f"m{n}", "revision": 1, "space": "to"}})  # fmt: skip
    assert all("ok" in owner.receive() for _ in range(50))
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    owner.close()
    seen: dict[str, int] = {}
    moved = 0
    for space in ("from", "to"):
        after = None
        while True:
            page = home.ok(
                "memory", "list", "--spaces", space, "--limit", "200", *(["--after", after] if after else [])
            )
            for m in page["memories"]:
                seen[m["snippet"]] = seen.get(m["snippet"], 0) + 1
            moved += len(page["memories"]) if space == "to" else 0
            after = page["next"]
            if after is None:
                break
    assert seen == {f"moving memory {n}": 1 for n in range(total)}
    assert moved >= 50, "every acknowledged move committed"
    assert moved < total, "the kill interrupted the run: some moves never committed"
    print(f"\n{moved} of {total} moves committed before the kill")


# Audit and usage (docs/governance.md)


def test_audit_shows_each_change_with_fields_never_text_and_pages(home: Home, owner: DaemonClient,
                                                                  clients: Clients) -> None:  # fmt: skip
    ident = add(owner, "audited secret-free text ALPHA")
    owner.call("memory.update", id=ident, revision=1, content="audited text BETA", title="t")
    owner.call("memory.search", query="audited", record_usage=True)
    owner.call("memory.recall", spaces=[SPACE], query="audited text")
    owner.call("memory.search", query="audited")
    owner.call("memory.archive", id=ident, revision=2)
    owner.call("memory.restore", id=ident)
    owner.call("memory.delete", id=ident, revision=4)
    listed = events(owner, ident)
    assert [e["type"] for e in listed] == ["memory.deleted", "memory.restored", "memory.archived",
                                           "memory.recalled", "memory.updated", "memory.added"]  # fmt: skip
    assert listed[4]["data"] == {"fields": ["content", "title"]}
    assert listed[3]["data"]["hash"] == "sha256" and "audited" not in json.dumps(listed[3])
    assert all(e["principal"] == "owner" and e["ts"] and e["memory"] == ident for e in listed)
    assert "ALPHA" not in json.dumps(listed) and "BETA" not in json.dumps(listed)
    page = owner.call("memory.audit", id=ident, limit=2)
    assert [e["id"] for e in page["events"]] == [e["id"] for e in listed[:2]] and page["next"] == listed[1]["id"]
    rest = owner.call("memory.audit", id=ident, after=page["next"], limit=1000)["events"]
    assert [e["id"] for e in rest] == [e["id"] for e in listed[2:]]
    text = home.cli("memory", "audit", "--id", ident).out
    assert "memory.updated" in text and "BETA" not in text
    other = client_token(owner, "elsewhere", [("read", "space:other")])
    unreadable = raises(clients(other), "memory.audit", id=ident)
    absent = raises(clients(other), "memory.audit", id="m999")
    assert (unreadable.code, unreadable.data) == (absent.code, absent.data) == ("not_found.memory", {})


def test_an_audit_of_a_purged_memory_shows_only_ids_and_field_names(home: Home, owner: DaemonClient) -> None:
    ident = add(owner, "purge me: OMEGA-TEXT")
    owner.call("memory.update", id=ident, revision=1, content="purge me later: OMEGA-TEXT", tags=["x"])
    owner.call("memory.challenge", id=ident, revision=2, outcome="needs_review")
    home.ok("memory", "purge", "--id", ident)
    listed = events(owner, ident)
    assert [e["type"] for e in listed] == ["memory.purged", "memory.challenged", "memory.updated", "memory.added"]
    assert "OMEGA" not in json.dumps(listed) and "purge me" not in json.dumps(listed)
    assert listed[2]["data"] == {"fields": ["content", "tags"]}


def test_after_purge_the_audit_keeps_a_challenge_reason_but_no_text(home: Home, owner: DaemonClient) -> None:
    ident = add(owner, "purged later: SIGMA-TEXT")
    other = add(owner, "the memory it relates to")
    owner.call("memory.relate", source=ident, target=other, relation="related", reason="relation-why-RHO")
    owner.call("memory.challenge", id=ident, revision=1, outcome="needs_review", reason="checked with on-call TAU")
    home.ok("memory", "purge", "--id", ident)
    listed = events(owner, ident)
    assert [e["type"] for e in listed] == ["memory.purged", "memory.challenged", "relation.created", "memory.added"]
    # docs/governance.md: the challenge event carries its outcome and reason; events are never rewritten, and
    # carry ids and small data, never memory text (docs/memories.md: the purge event keeps the id)
    assert listed[1]["data"] == {"outcome": "needs_review", "fields": ["confidence_state"],
                                 "reason": "checked with on-call TAU"}  # fmt: skip
    assert listed[2]["data"] == {"target": other, "relation": "related"}, "a relation's reason is not in its event"
    assert listed[0]["data"] == {} and listed[0]["revision"] == 2
    assert "SIGMA" not in json.dumps(listed) and "RHO" not in json.dumps(listed)
    assert owner.call("memory.get", id=other)["relations"] == [], "purge removed the relation and its reason"
    assert "SIGMA" not in home.cli("memory", "audit", "--id", ident).out


def test_recall_writes_nothing_to_rows_or_the_audit(home: Home, owner: DaemonClient) -> None:
    ident = add(owner, "recall reads only")
    before = (owner.call("memory.get", id=ident), event_count(owner))
    assert "recall reads only" in recalled(owner, "recall reads only")
    home.ok("memory", "recall", "--spaces", SPACE, "--query", "recall reads only")
    assert (owner.call("memory.get", id=ident), event_count(owner)) == before


@pytest.mark.sqlite_only  # edits the store file; tests/test_postgres.py edits the team store
def test_a_rewritten_event_is_named_by_the_chain_verification(home: Home, owner: DaemonClient) -> None:
    ident = add(owner, "chained")
    owner.call("memory.challenge", id=ident, revision=1, outcome="needs_review", reason="marker-qqqq-1")
    target = events(owner, ident)[0]["id"]
    owner.call("memory.challenge", id=ident, revision=2, outcome="still_valid")
    owner.close()
    home.ok("stop")
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    path = home.paths.store
    for name in (path, path + "-wal"):
        if os.path.exists(name):
            with open(name, "r+b") as f:
                data = f.read()
                if b"marker-qqqq-1" in data:
                    f.seek(0)
                    f.write(data.replace(b"marker-qqqq-1", b"marker-qqqq-2"))
    conn = db.Connection(path)
    try:
        found = events_chain(conn)
    finally:
        conn.close()
    assert [f.get("event") for f in found] == [target]


# Surfaces: MCP and grants


def test_governance_through_mcp(home: Home) -> None:
    async def main() -> None:
        async with mcp_session(home) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            for name in ("memory_challenge", "memory_archive", "memory_move", "memory_unrelate"):
                assert tools[name].annotations.destructive_hint is True, name
            assert tools["memory_review"].annotations.read_only_hint is True
            assert "memory_add" in str(tools["memory_capture"].description)
            assert "memory_capture" in str(tools["memory_add"].description)
            draft = await s.call_tool("memory_capture", {"space": SPACE, "content": "mcp inferred it"})
            ident = draft.structured_content["id"]
            assert draft.structured_content["status"] == "draft"
            await s.call_tool("memory_confirm", {"id": ident, "revision": 1})
            preview = await s.call_tool("memory_challenge", {"id": ident, "revision": 2, "outcome": "wrong"})
            assert preview.structured_content["applied"] is False
            applied = await s.call_tool("memory_challenge", {"id": ident, "revision": 2, "outcome": "wrong",
                                                             "confirm": True})  # fmt: skip
            assert applied.structured_content == {"id": ident, "revision": 3, "outcome": "wrong", "applied": True}
            audit = await s.call_tool("memory_audit", {"id": ident})
            kinds = [e["type"] for e in audit.structured_content["events"]]
            assert kinds == ["memory.challenged", "memory.confirmed", "memory.captured"]
            bad = await s.call_tool("memory_confirm", {"id": ident, "revision": 3})
            assert bad.is_error and bad.structured_content is None
            assert json.loads(bad.content[0].text)["code"] == "conflict.memory_status"  # type: ignore[union-attr]

    anyio.run(main)


def test_grants_gate_every_governance_write(home: Home, owner: DaemonClient, clients: Clients) -> None:
    mine = add(owner, "in my space")
    theirs = add(owner, "in their space", space="team/theirs")
    draft = owner.call("memory.capture", space="team/theirs", content="their draft")["id"]
    token = client_token(owner, "narrow", [("read", "*"), ("write", f"space:{SPACE}")])
    narrow = clients(token)
    for verb, params in (
        ("memory.capture", {"space": "team/theirs", "content": "x"}),
        ("memory.confirm", {"id": draft, "revision": 1}),
        ("memory.challenge", {"id": theirs, "revision": 1, "outcome": "needs_review"}),
        ("memory.archive", {"id": theirs, "revision": 1}),
        ("memory.relate", {"source": theirs, "target": mine, "relation": "related"}),
        ("memory.move", {"id": theirs, "revision": 1, "space": SPACE}),
    ):
        assert raises(narrow, verb, **params).code == "denied.write", verb
    assert narrow.call("memory.relate", source=mine, target=theirs, relation="related")["changed"] is True
    fails(home, "memory", "capture", "--space", SPACE, "--content", "x", code="denied.write", exit_code=4, token=None)
    with pytest.raises(HivememError):
        narrow.call("memory.review", spaces=["nope/none"], after="m1", limit=0)
