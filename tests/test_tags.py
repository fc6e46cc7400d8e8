"""Tags in any script (docs/decisions.md D280): letters and digits of every script and `-`, lower case where
the script has case, NFC, 1-64 bytes; ASCII tags keep their old grammar; a refusal states the rule in words."""

from __future__ import annotations

import json
import os

from conftest import Home, fails, raises
from hivemem.client import DaemonClient

WIDE = ["部署", "デプロイ", "배포", "café", "сборка", "हिन्दी", "v2-発布"]


def test_tags_of_every_script_through_the_cli(home: Home) -> None:
    added = home.ok("memory", "add", "--space", "user", "--content", "Deploys run make release.",
                    "--tags", ",".join(WIDE))  # fmt: skip
    memory = home.ok("memory", "get", "--id", added["id"])
    assert memory["tags"] == WIDE
    home.ok("memory", "add", "--space", "user", "--content", "Another memory, other tags.", "--tags", "ops")
    listed = home.ok("memory", "list", "--tags", "部署,배포")
    assert [m["id"] for m in listed["memories"]] == [added["id"]]
    found = home.ok("memory", "search", "--query", "部署")
    assert [h["id"] for h in found["results"]] == [added["id"]], "a tag in Chinese is found by its words"
    home.ok("memory", "update", "--id", added["id"], "--revision", "1", "--tags", "デプロイ,old-ascii-tag")
    assert home.ok("memory", "get", "--id", added["id"])["tags"] == ["デプロイ", "old-ascii-tag"]
    assert home.ok("store", "check")["ok"] is True, "stored tags of any script pass the integrity check"


def test_a_refused_tag_states_the_rule_in_words(home: Home) -> None:
    for bad in ("Café", "cafe\u0301", "部署!", "部" * 22, "-lead", "under_score"):
        error = fails(home, "memory", "add", "--space", "user", "--content", "x", "--tags", f"ok,{bad}",
                      code="invalid_params.range", exit_code=2)  # fmt: skip
        message = error["message"]
        assert error["data"]["param"] == "tags"
        assert "item 2 is not a tag" in message, message
        for words in ("letters and digits of any script", "lower case", "NFC", "1 to 64 bytes"):
            assert words in message, message
        assert "[" not in message and "^" not in message and "$" not in message, "no regular expression"
    assert home.ok("memory", "list")["memories"] == [], "nothing was written"
    human = home.cli("memory", "add", "--space", "user", "--content", "x", "--tags", "Deploy")
    assert human.code == 2 and "letters and digits of any script" in human.err


def test_tags_of_every_script_through_the_daemon(owner: DaemonClient) -> None:
    added = owner.call("memory.add", space="user", content="We ship with make release.", tags=WIDE)
    assert owner.call("memory.get", id=added["id"])["tags"] == WIDE
    listed = owner.call("memory.list", tags=["сборка"])
    assert [m["id"] for m in listed["memories"]] == [added["id"]]
    for bad in (["Сборка"], ["部署", "部署"], ["a b"], ["ǅ"], [""]):
        error = raises(owner, "memory.add", space="user", content="refused", tags=bad)
        assert error.code == "invalid_params.range", (bad, error.code)
    assert owner.call("memory.list", tags=["部署"])["memories"][0]["id"] == added["id"]
    assert len(owner.call("memory.list")["memories"]) == 1


def test_old_ascii_tags_stay_valid_and_imports_carry_wide_tags(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "An old memory.", "--tags", "a-b-,0,deploy")
    dump = os.path.join(home.base, "dump.json")
    home.ok("store", "export", "--path", dump)
    with open(dump, encoding="utf-8") as f:
        document = json.load(f)
    assert document["memories"][0]["tags"] == ["a-b-", "0", "deploy"]
    document["memories"][0]["tags"] = ["部署", "배포"]
    document["memories"][0]["content"] = "An imported memory."
    with open(dump, "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=False)
    home.ok("store", "import", "--path", dump)
    tags = sorted(tuple(m["tags"]) for m in home.ok("memory", "list")["memories"])
    assert tags == [("a-b-", "0", "deploy"), ("部署", "배포")]
    document["memories"][0]["tags"] = ["部署", "Bad"]
    document["memories"][0]["content"] = "A refused import."
    with open(dump, "w", encoding="utf-8") as f:
        json.dump(document, f, ensure_ascii=False)
    fails(home, "store", "import", "--path", dump, code="invalid_params.import", exit_code=2)
    assert len(home.ok("memory", "list")["memories"]) == 2


def test_markdown_notes_keep_tags_of_every_script(home: Home) -> None:
    notes = os.path.join(home.base, "vault")
    os.makedirs(notes)
    with open(os.path.join(notes, "deploy.md"), "w", encoding="utf-8") as f:
        f.write('---\ntags: [部署, Café, "release notes", デプロイ!]\n---\nTag a release, then deploy.\n')
    home.ok("import", "--from", "markdown", "--path", notes, "--space", "user", "--active")
    (memory,) = home.ok("memory", "list")["memories"]
    assert memory["tags"] == ["部署", "café", "release-notes", "デプロイ"]
