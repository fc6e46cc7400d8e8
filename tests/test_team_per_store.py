"""Per store, with a team store mounted beside the personal one (docs/team.md, D402): events and export of team
spaces come from the team store, and an import never writes a team space into the personal store. memory.hygiene
with no spaces, or spaces of both stores, runs on both at once (D406): each finding says its `store`, a team finding
names its memories `t:m<N>` everywhere, and its action sent back through the daemon runs on the team store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import psycopg

from conftest import fails, isolated_home, wait_for
from hivemem import records, schemas
from hivemem.daemon.team import finding, joined
from test_events import Lines
from test_team_federation import Proxy, Team, connected, free_port, person, team, team_rows, timed, via

__all__ = ["team"]  # the fixture, used by name


def test_events_of_team_spaces_come_from_the_team_store(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana, person(team.url, team.tokens["ben"]) as ben:
        shared = ana.ok("memory", "add", "--space", "team/platform", "--content", "the staging cluster is kind-3")
        ana.ok("memory", "add", "--space", "user", "--content", "ana reads the audit on fridays")

        # the team's audit is shared: ben sees ana's add there, under its qualified id
        for h in (ana, ben):
            events = h.ok("events", "list", "--spaces", "team/platform")["events"]
            added = [e for e in events if e["type"] == "memory.added"]
            assert [(e["memory"], e["space"]) for e in added] == [(shared["id"], "team/platform")]
            assert {e["space"] for e in events if "space" in e} == {"team/platform"}

        # the personal audit holds the personal store's events only, as before
        mine = ana.ok("events", "list")["events"]
        assert {e.get("space") for e in mine if e["type"] == "memory.added"} == {"user"}
        assert ben.ok("events", "list", "--types", "memory.added")["events"] == []

        both = fails(ana, "events", "list", "--spaces", "user", "--spaces", "team/platform",
                     code="invalid_params.stores", exit_code=2)  # fmt: skip
        assert "one store" in both["message"]


def test_export_of_team_spaces_writes_the_team_stores_document(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana:
        ana.ok("memory", "add", "--space", "team/platform", "--content", "the on-call rota lives in the wiki")
        ana.ok("memory", "add", "--space", "user", "--content", "ana's private export note")

        exported = ana.ok("store", "export", "--spaces", "team/platform")
        assert exported["memories"] == 1
        assert os.path.dirname(os.path.dirname(exported["path"])).endswith("team")  # the team directory's exports/
        assert os.stat(exported["path"]).st_mode & 0o777 == 0o600
        with open(exported["path"]) as f:
            document = json.load(f)
        assert [m["content"] for m in document["memories"]] == ["the on-call rota lives in the wiki"]

        # the team token names no file on this machine: the owner's --path is refused, nothing is written
        target = os.path.join(ana.base, "team-export.json")
        refused = fails(ana, "store", "export", "--spaces", "team/platform", "--path", target,
                        code="denied.path", exit_code=4)  # fmt: skip
        assert "--path" in refused["data"]["fix"] and not os.path.exists(target)

        personal = ana.ok("store", "export", "--spaces", "user")  # unchanged for personal spaces
        with open(personal["path"]) as f:
            assert [m["content"] for m in json.load(f)["memories"]] == ["ana's private export note"]


def test_an_import_never_writes_a_team_space_into_the_personal_store(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana:
        ana.ok("memory", "add", "--space", "user", "--content", "ana keeps a changelog per sprint")
        path = ana.ok("store", "export", "--spaces", "user")["path"]
        before = ana.ok("memory", "list")["memories"]

        refused = fails(ana, "store", "import", "--path", path, "--space-map", '{"user": "team/notes"}',
                        code="invalid_params.stores", exit_code=2)  # fmt: skip
        assert "team/notes" in refused["message"] and refused["data"]["param"] == "space_map"
        assert ana.ok("memory", "list")["memories"] == before
        assert team_rows(team.url, "ana keeps a changelog per sprint") == 0

        mapped = ana.ok("store", "import", "--path", path, "--space-map", '{"user": "project/sprints"}')
        assert mapped["applied"] is True and mapped["planned"]["add"] == 1
        listed = ana.ok("memory", "list", "--spaces", "project/sprints")["memories"]
        assert [(m["space"], m["store"]) for m in listed] == [("project/sprints", "personal")]


def test_space_list_shows_the_spaces_of_both_stores_in_name_order_and_pages_through_them(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana, person(team.url, team.tokens["ben"]) as ben:
        for space in ("team/alpha", "team/zulu"):
            ben.ok("memory", "add", "--space", space, "--content", f"a note kept in {space}")
        for space in ("project/web", "user"):
            ana.ok("memory", "add", "--space", space, "--content", f"ana's note in {space}")
        ben.ok("memory", "add", "--space", "user", "--content", "ben's own note")

        listed = ana.ok("space", "list")
        assert [(r["space"], r["store"], r["memories"]) for r in listed["spaces"]] == [
            ("project/web", "personal", 1),
            ("team/alpha", "team", 1),
            ("team/zulu", "team", 1),
            ("user", "personal", 1),
        ]
        assert listed["next"] is None and "unavailable" not in listed

        pages, after = [], None
        while True:
            page = ana.ok("space", "list", "--limit", "1", *(["--after", after] if after else []))
            pages += [r["space"] for r in page["spaces"]]
            if page["next"] is None:
                break
            after = page["next"]
        assert pages == ["project/web", "team/alpha", "team/zulu", "user"]  # each once, in name order

        table = ana.cli("space", "list").out.splitlines()
        assert "STORE" in table[0].split() and table[2].split()[0] == "team/alpha" and "team" in table[2].split()


def test_space_list_with_the_team_store_stopped_lists_the_personal_spaces_and_says_so() -> None:
    with person("postgresql://127.0.0.1:9/none?connect_timeout=2", "hm1.g1." + "a" * 43, timeout_ms=800) as ana:
        ana.ok("memory", "add", "--space", "user", "--content", "ana's note while the team store is away")
        listed = ana.ok("space", "list")
        assert [(r["space"], r["store"]) for r in listed["spaces"]] == [("user", "personal")]
        assert listed["unavailable"] == ["team"]


def test_the_review_queue_holds_what_is_due_in_both_stores(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana, person(team.url, team.tokens["ben"]) as ben:
        due = "--review-after", "2021-01-01T00:00:00Z"
        shared = ben.ok("memory", "add", "--space", "team/platform", "--content", "check the runbook links", *due)
        ben.ok("memory", "add", "--space", "team/platform", "--content", "fresh: not due", "--review-after",
               "2999-01-01T00:00:00Z")  # fmt: skip
        mine = ana.ok("memory", "add", "--space", "user", "--content", "renew my certificates", *due)

        queue = ana.ok("memory", "review")
        assert [(m["id"], m["store"], m["review"]) for m in queue["memories"]] == [
            (mine["id"], "personal", "due"),
            (shared["id"], "team", "due"),
        ]
        assert [m["id"] for m in ana.ok("memory", "review", "--spaces", "team/platform")["memories"]] == [shared["id"]]
        # the other person's queue has the team's due memory, never ana's own
        assert [m["id"] for m in ben.ok("memory", "review")["memories"]] == [shared["id"]]


def test_the_review_queue_pages_through_both_stores(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana:
        due = "--review-after", "2021-01-01T00:00:00Z"
        made = [ana.ok("memory", "add", "--space", space, "--content", f"due note {n}", *due)["id"]
                for n, space in enumerate(("user", "team/a", "user", "team/a"))]  # fmt: skip
        seen, after = [], None
        while True:
            page = ana.ok("memory", "review", "--limit", "1", *(["--after", after] if after else []))
            seen += [m["id"] for m in page["memories"]]
            if page["next"] is None:
                break
            after = page["next"]
        assert sorted(seen) == sorted(made) and len(seen) == 4  # each due memory once, from both stores


def test_events_follow_of_team_spaces_streams_the_team_stores_new_events(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana, person(team.url, team.tokens["ben"]) as ben:
        first = ben.ok("memory", "add", "--space", "team/platform", "--content", "the team's first note")["id"]
        env = dict(ana.env, HIVEMEM_TOKEN="@owner")
        proc = subprocess.Popen([sys.executable, "-m", "hivemem", "events", "follow", "--after", "0", "--spaces",
                                 "team/platform", "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=ana.base)  # fmt: skip
        lines = Lines(proc)
        try:
            line = lines.next(30)
            assert line is not None, "the follower printed nothing"
            assert json.loads(line)["memory"] == first  # the team store's event, by its qualified id
            ana.ok("memory", "add", "--space", "user", "--content", "a personal note the team stream never shows")
            later = ben.ok("memory", "add", "--space", "team/platform", "--content", "added on another machine")["id"]
            line = lines.next(30)  # no commit of this daemon wakes it: it polls the team store again
            assert line is not None and json.loads(line)["memory"] == later, line
            assert json.loads(line)["space"] == "team/platform" and proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(10)
            for pipe in (proc.stdout, proc.stderr):
                if pipe:
                    pipe.close()


ADD = ("memory", "add", "--space")
BARE_ID = re.compile(r"(?<![\w:])m[0-9]+\b")


def team_status(url: str, content: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT status FROM memories WHERE content = %s ORDER BY id", (content,)).fetchall()
        return [str(r[0]) for r in rows]


def pair(h: Any, space: str, first: str, second: str) -> tuple[str, str]:
    return h.ok(*ADD, space, "--content", first)["id"], h.ok(*ADD, space, "--content", second)["id"]


def test_a_team_finding_is_qualified_everywhere_it_names_a_memory() -> None:
    found = {"kind": "duplicate", "memories": ["m3", "m12"], "space": "team/x",
             "reason": "same text as m12 once case, width and punctuation are ignored (same capture key)",
             "fix": "hivemem memory challenge --id m3 --revision 1 --outcome superseded --replacement m12 "
                    "--reason 'duplicate of m12'",
             "action": {"verb": "memory.challenge",
                        "params": {"id": "m3", "revision": 1, "outcome": "superseded", "replacement": "m12",
                                   "reason": "duplicate of m12"}}}  # fmt: skip
    out = finding(found)
    assert out["memories"] == ["t:m3", "t:m12"] and out["store"] == "team"
    assert out["action"]["params"] == {"id": "t:m3", "revision": 1, "outcome": "superseded", "replacement": "t:m12",
                                       "reason": "duplicate of t:m12"}  # fmt: skip
    assert out["fix"] == ("hivemem memory challenge --id t:m3 --revision 1 --outcome superseded --replacement t:m12 "
                          "--reason 'duplicate of t:m12'")  # fmt: skip
    assert out["reason"].startswith("same text as t:m12 once")
    for text in (out["reason"], out["fix"], *map(str, out["action"]["params"].values())):
        assert not BARE_ID.search(text), text
    mine = {"findings": [{"kind": "stale"}] * 2, "counts": {"duplicate": 0, "stale": 2}, "memories": 5,
            "embeddings": "off", "usage_recorded": True, "truncated": False}  # fmt: skip
    theirs = {"findings": [out], "counts": {"duplicate": 1, "stale": 0}, "memories": 4, "embeddings": "off",
              "usage_recorded": True, "truncated": False}  # fmt: skip
    both = joined(mine, theirs, 2)
    assert both["counts"] == {"duplicate": 1, "stale": 2} and both["memories"] == 9
    assert both["truncated"] is True and both["findings"] == mine["findings"]  # the cut dropped the team's
    assert joined(mine, theirs, 3)["truncated"] is False


def test_hygiene_with_no_spaces_reports_both_stores_and_a_team_fix_runs_there(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana:
        old, new = pair(ana, "team/platform", "deploys go blue-green via argo", "Deploys go blue-green via Argo!")
        mine = pair(ana, "user", "ana prefers small pull requests", "Ana prefers small pull requests.")
        report = ana.ok("hygiene")
        jsonschema.validate(report, schemas.json_schema(records.HygieneReport))
        duplicates = [f for f in report["findings"] if f["kind"] == "duplicate"]
        assert [(f["store"], f["space"], f["memories"]) for f in duplicates] == [
            ("personal", "user", list(mine)),
            ("team", "team/platform", [old, new]),
        ], duplicates
        assert all(f.get("store") in ("personal", "team") for f in report["findings"])
        assert report["counts"]["duplicate"] == 2 and report["memories"] == 4 and "unavailable" not in report
        theirs = duplicates[1]
        params = theirs["action"]["params"]
        assert (params["id"], params["replacement"]) == (old, new) and old.startswith("t:m")
        assert f"--id {old} " in theirs["fix"] and f"--replacement {new} " in theirs["fix"]
        assert not BARE_ID.search(theirs["fix"]) and not BARE_ID.search(theirs["reason"]), theirs
        # spaces of both stores: both again; only team spaces: the team's alone
        split = ana.ok("hygiene", "--spaces", "user", "--spaces", "team/platform")
        assert [f["store"] for f in split["findings"] if f["kind"] == "duplicate"] == ["personal", "team"]
        alone = ana.ok("hygiene", "--spaces", "team/platform")
        assert [(f["store"], f["memories"]) for f in alone["findings"]] == [("team", [old, new])]
        assert ana.ok("hygiene", "--limit", "1")["truncated"] is True

        with connected(ana) as client:  # the team finding's action, sent back as it came: it runs on the team store
            done = client.call(theirs["action"]["verb"], **params, confirm=True)
            assert done["applied"] is True and done["id"] == old
        assert team_status(team.url, "deploys go blue-green via argo") == ["archived"]
        assert [f["store"] for f in ana.ok("hygiene")["findings"] if f["kind"] == "duplicate"] == ["personal"]
        assert ana.ok("memory", "get", "--id", mine[0])["status"] == "active"  # the personal pair is untouched


def test_hygiene_shows_only_team_spaces_the_connection_may_read(team: Team) -> None:
    with person(team.url, team.tokens["ana"]) as ana:
        pair(ana, "team/platform", "the build cache lives in s3", "The build cache lives in S3!")
        pair(ana, "team/secret", "the pager rota is on the wiki", "The pager rota is on the wiki.")
        grants = '[{"right":"read","scope":"space:team/platform"}]'
        token = ana.ok("client", "add", "--name", "reader", "--grants", grants)["token"]
        seen = ana.cli("hygiene", "--json", token=token).json
        assert [(f["store"], f["space"]) for f in seen["findings"]] == [("team", "team/platform")], seen
        assert seen["counts"]["duplicate"] == 1
        assert {f["space"] for f in ana.ok("hygiene")["findings"]} == {"team/platform", "team/secret"}


def test_hygiene_with_the_team_store_stopped_is_the_personal_report_saying_so(team: Team) -> None:
    closed = via(team.url, free_port())  # nothing listens there: the server is stopped
    with person(closed, team.tokens["ana"], timeout_ms=1000) as ana:
        mine = pair(ana, "user", "ana reviews on mondays", "Ana reviews on Mondays!")
        took, result = timed(ana, "hygiene")
        report = result.json
        assert report["unavailable"] == ["team"] and report["memories"] == 2, report
        assert [(f["store"], f["memories"]) for f in report["findings"]] == [("personal", list(mine))]
        assert took < 1.0 + 2.0, took  # the team part is given up after team.timeout_ms
        jsonschema.validate(report, schemas.json_schema(records.HygieneReport))
        assert "unavailable: team" in ana.cli("hygiene").out
        print(f"hygiene with the team store stopped: {took * 1000:.0f} ms")


def test_hygiene_with_the_team_store_dropping_packets_is_given_up_after_the_timeout(team: Team) -> None:
    target = urlsplit(team.url)
    proxy = Proxy((target.hostname or "127.0.0.1", target.port or 5432))
    timeout_ms = 800
    try:
        with person(via(team.url, proxy.port), team.tokens["ana"], timeout_ms=timeout_ms) as ana:
            pair(ana, "team/infra", "the cache is redis seven", "The cache is Redis seven!")
            mine = pair(ana, "user", "ana writes tests first", "Ana writes tests first.")
            usual, result = timed(ana, "hygiene")
            assert [f["store"] for f in result.json["findings"]] == ["personal", "team"], result
            proxy.dropping = True  # the connection the daemon holds now leads nowhere
            took, result = timed(ana, "hygiene")
            report = result.json
            assert result.code == 0 and report["unavailable"] == ["team"], report
            assert [(f["store"], f["memories"]) for f in report["findings"]] == [("personal", list(mine))]
            assert took < usual + timeout_ms / 1000 + 1.0, (took, usual)
            proxy.dropping = False  # the server is back: the next report holds the team's findings again
            assert wait_for(lambda: "unavailable" not in ana.ok("hygiene")), "the team store came back"
            print(f"hygiene, team store dropping packets: usual {usual * 1000:.0f} ms, {took * 1000:.0f} ms")
    finally:
        proxy.close()


def test_hygiene_without_a_team_store_is_unchanged() -> None:
    with isolated_home() as h:
        pair(h, "user", "prefers small pull requests", "Prefers small pull requests!")
        report = h.ok("hygiene")
        assert report["counts"]["duplicate"] == 1 and "unavailable" not in report
        assert all("store" not in f for f in report["findings"])
        assert set(report) == {"findings", "counts", "memories", "embeddings", "usage_recorded", "truncated"}
