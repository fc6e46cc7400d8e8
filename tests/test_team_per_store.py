"""Per store, with a team store mounted beside the personal one (docs/team.md, D402): events and export of team
spaces come from the team store, and an import never writes a team space into the personal store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import fails
from test_events import Lines
from test_team_federation import Team, person, team, team_rows

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
