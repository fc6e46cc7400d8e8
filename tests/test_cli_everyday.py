"""The CLI as people use it: group help, repeated list flags, tables, advice on stderr, stdin and file bounds."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import Home, fails, spec_citations
from hivemem.cli import groups
from hivemem.manifest import VERBS

GROUPS = ("memory", "space", "store", "session", "client", "events", "config")


def listed_lines(text: str) -> list[str]:
    return text.split("commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()


def listed_commands(text: str) -> list[str]:
    return [line.split()[0] for line in listed_lines(text)]


@pytest.mark.parametrize("group", GROUPS[:-2])
def test_every_group_lists_its_commands_one_line_each(home: Home, group: str) -> None:
    expected = [*groups.EXTRA.get(group, {})]  # commands that are not verbs (store restore) come first
    expected += [v.cli_name.rpartition(" ")[2] for v in VERBS if v.cli_name.rpartition(" ")[0] == group]
    for args in ((group,), (group, "--help"), (group, "-h")):
        result = home.cli(*args)
        assert (result.code, result.err) == (0, ""), (args, result)
        assert listed_commands(result.out) == expected, args
    wrong = fails(home, group, "bogus", code="invalid_params.usage", exit_code=2)
    assert all(name in wrong["message"] for name in expected) and wrong["data"]["usage"].startswith("usage: hivemem")
    assert home.daemon_pid() is None


def test_config_lists_get_set_and_reload(home: Home) -> None:
    assert listed_commands(home.cli("config", "--help").out) == ["get", "set", "reload"]
    assert listed_commands(home.cli("config").out) == ["get", "set", "reload"]
    fails(home, "config", "nope", code="invalid_params.usage", exit_code=2)


def top_level_commands(home: Home) -> list[str]:
    """The first words of the commands `hivemem --help` lists: every top-level command and group."""
    listed = [line for line in home.cli("--help").out.splitlines() if line.startswith("  ")]
    return list(dict.fromkeys(line.split()[0] for line in listed))


def test_every_top_level_command_answers_help_without_doing_its_work(home: Home) -> None:
    top = top_level_commands(home)
    assert {"serve", "stop", "ping", "doctor", "mcp", "hook", "ui", "import", "hygiene", "memory"} <= set(top)
    for command in top:
        for flag in ("--help", "-h"):
            result = home.cli(command, flag, stdin="", timeout=20)  # stdin closed: a command that reads it ends
            assert (result.code, result.err) == (0, ""), (command, flag, result)
            assert result.out.startswith(f"usage: hivemem {command}"), (command, flag, result.out[:300])
        assert home.daemon_pid() is None, command
    assert not os.path.exists(home.paths.store) and not os.path.exists(home.paths.logs)


def help_of(home: Home, *command: str) -> str:
    result = home.cli(*command, "--help")
    assert result.code == 0, result
    return re.sub(r"\s+", " ", result.out)  # argparse wraps help lines


def flag_help(text: str, flag: str) -> str:
    found = re.search(rf"--{flag} [A-Z_]+ (.*?)(?= --[a-z]| hivemem |$)", text)
    assert found, (flag, text)
    return found[1]


def test_help_says_which_flags_read_stdin_or_a_file(home: Home) -> None:
    add = help_of(home, "memory", "add")
    assert flag_help(add, "content") == "The text to remember (UTF-8). `-` reads it from stdin. (required)"
    assert "`-` reads it from stdin" in flag_help(add, "title")
    assert "@FILE" in flag_help(add, "provenance") and "@FILE" in flag_help(add, "tags")
    assert "stdin" not in flag_help(add, "space") + flag_help(add, "session")
    assert "repeat the flag to add more" in flag_help(help_of(home, "memory", "search"), "spaces")
    assert "@FILE" in flag_help(help_of(home, "client", "add"), "grants")


def test_no_help_text_cites_the_specification(home: Home) -> None:
    texts = [home.cli("--help").out, home.cli("skill").out]
    texts += [home.cli("setup", harness).out for harness in ("claude-code", "codex", "opencode")]
    texts += [home.cli(c, "--help", stdin="").out for c in top_level_commands(home)]
    texts += [home.cli(g, "--help").out for g in GROUPS]
    texts += [home.cli(*v.cli_name.split(), "--help").out for v in VERBS if v.name != "whoami"]
    for text in texts:
        assert text and not spec_citations(text), (spec_citations(text), text[:200])


def test_ping_does_not_send_people_to_a_foreground_serve(home: Home) -> None:
    error = fails(home, "ping", code="unavailable.not_running", exit_code=6)
    assert "serve" not in error["data"]["fix"] and "starts it" in error["data"]["fix"]
    home.config('[daemon]\nstartup = "explicit"\n')
    assert fails(home, "ping", code="unavailable.not_running", exit_code=6)["data"]["fix"] == "hivemem serve"


def test_a_repeated_list_flag_accumulates(home: Home) -> None:
    repo = os.path.join(home.base, "api")
    os.makedirs(os.path.join(repo, ".git"))
    project = home.ok("memory", "add", "--space", "@project", "--content", "zebra in the project", cwd=repo)
    user = home.ok("memory", "add", "--space", "user", "--content", "zebra for the user")
    home.ok("memory", "add", "--space", "team/x", "--content", "zebra for the team")
    found = home.ok("memory", "search", "--query", "zebra", "--spaces", "@project", "--spaces", "user", cwd=repo)
    assert sorted(h["id"] for h in found["results"]) == sorted([project["id"], user["id"]])
    tagged = home.ok("memory", "add", "--space", "user", "--content", "tagged", "--tags", "a,b", "--tags", '["c"]')
    assert home.ok("memory", "get", "--id", tagged["id"])["tags"] == ["a", "b", "c"]
    events = home.ok("events", "list", "--types", "memory.added", "--types", "memory.updated", "--spaces", "user")
    assert {e["memory"] for e in events["events"]} == {user["id"], tagged["id"]}


def table(text: str) -> list[list[str]]:
    """Rows of an aligned table: columns split at runs of two or more spaces."""
    return [re.split(r" {2,}", line.rstrip()) for line in text.splitlines()]


def test_lists_print_aligned_tables_for_people(home: Home) -> None:
    home.ok("client", "add", "--name", "codex", "--grants", '[{"right":"read","scope":"*"}]')
    home.ok("memory", "add", "--space", "user", "--content", "a table row")
    clients = home.cli("client", "list").out
    assert not clients.lstrip().startswith(("{", "clients")), clients
    assert table(clients)[0] == ["NAME", "PRINCIPAL", "GRANTS", "CREATED", "EXPIRES"]
    assert table(clients)[1][:3] == ["codex", "g1", "read *"] and table(clients)[1][-1] == "never"
    spaces = table(home.cli("space", "list").out)
    assert spaces[0] == ["SPACE", "MEMORIES", "UPDATED"] and spaces[1][:2] == ["user", "1"]
    events = home.cli("events", "list").out
    assert table(events)[0][:4] == ["ID", "TIME", "TYPE", "BY"] and "memory.added" in events and "[{" not in events
    for text in (clients, events, home.cli("space", "list").out, home.cli("doctor").out):
        header, *rows = text.splitlines()
        starts = [m.start() for m in re.finditer(r"(?<=  )\S", header)]
        for row in rows:
            if not row.lstrip().startswith("fix:"):
                assert all(row[s - 2 : s] == "  " and row[s] != " " for s in starts[:2]), (header, row)


def test_history_says_how_to_read_an_old_version(home: Home) -> None:
    added = home.ok("memory", "add", "--space", "user", "--content", "first text")
    home.ok("memory", "update", "--id", added["id"], "--revision", "1", "--content", "second text")
    history = home.cli("memory", "history", "--id", added["id"]).out
    assert "memory get --id" in history and "--revision N" in history
    assert home.ok("memory", "get", "--id", added["id"], "--revision", "1")["content"] == "first text"


def test_a_space_on_no_recall_path_is_stored_with_a_warning(home: Home) -> None:
    home.config('[recall]\nteam_spaces = ["team/core"]\n')
    typo = home.cli("memory", "add", "--space", "usr", "--content", "a typo for user", "--json")
    assert typo.code == 0 and json.loads(typo.out)["changed"] is True
    assert "warning: space 'usr' is on no recall path" in typo.err
    assert "fix:" in typo.err and """'["team/core", "usr"]'""" in typo.err
    for space in ("user", "project/api", "team/core"):
        fine = home.cli("memory", "add", "--space", space, "--content", f"stored in {space}")
        assert fine.code == 0 and fine.err == "", (space, fine)


@pytest.mark.parametrize("where", ["root", "home", "temp", "nameless"])
def test_project_has_no_value_in_the_root_home_or_temp_directory(home: Home, where: str) -> None:
    home.env["HOME"] = os.path.join(home.base, "user")
    home.env["TMPDIR"] = os.path.join(home.base, "tmp")
    nameless = os.path.join(home.base, "---")
    for directory in (home.env["HOME"], home.env["TMPDIR"], nameless):
        os.makedirs(directory)
    cwd = {"root": "/", "home": home.env["HOME"], "temp": home.env["TMPDIR"], "nameless": nameless}[where]
    home.ok("memory", "add", "--space", "user", "--content", "readable from anywhere", "--kind", "preference")
    result = home.cli("memory", "add", "--space", "@project", "--content", "where would this go", "--json", cwd=cwd)
    assert result.code == 2, result
    error = result.json["error"]
    assert (error["code"], error["data"]["param"]) == ("invalid_params.space", "space")
    assert "repository" in error["data"]["fix"] and "project/<name>" in error["data"]["fix"]
    assert home.cli("memory", "list", "--spaces", "user,@project", "--json", cwd=cwd).code == 2
    recalled = home.ok("memory", "recall", cwd=cwd)  # the fixed read path leaves the project out
    assert recalled["count"] == 1 and "readable from anywhere" in recalled["text"]
    assert [m["space"] for m in home.ok("memory", "list")["memories"]] == ["user"]


def test_inside_a_repository_the_home_directory_is_a_project(home: Home) -> None:
    home.env["HOME"] = os.path.join(home.base, "dotfiles")
    os.makedirs(os.path.join(home.env["HOME"], ".git"))
    added = home.ok("memory", "add", "--space", "@project", "--content", "dotfiles", cwd=home.env["HOME"])
    assert home.ok("memory", "get", "--id", added["id"])["space"] == "project/dotfiles"


def count(home: Home) -> int:
    return len(home.ok("memory", "list", "--limit", "200")["memories"])


def test_stdin_over_the_content_bound_is_refused_before_sending(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "already here")
    for size in (65537, 300_000, 5 * 1024 * 1024):
        result = home.cli("memory", "add", "--space", "user", "--content", "-", "--json", stdin=b"a" * size)
        assert result.code == 2, (size, result)
        assert result.json["error"]["code"] == "invalid_params.range", result
        assert result.json["error"]["data"] == {"param": "content", "max_bytes": 65536}
    home.config("[memory]\nmax_content_bytes = 1000\n")
    home.stop_daemon()
    small = home.cli("memory", "add", "--space", "user", "--content", "-", "--json", stdin=b"b" * 1001)
    assert small.json["error"]["data"] == {"param": "content", "max_bytes": 1000}
    exact = home.ok("memory", "add", "--space", "user", "--content", "-", stdin=b"c" * 1000 + b"\n")
    assert len(home.ok("memory", "get", "--id", exact["id"])["content"]) == 1000
    assert count(home) == 2


def test_a_file_over_the_frame_is_refused_before_sending(home: Home) -> None:
    path = os.path.join(home.base, "provenance.json")
    with open(path, "w") as f:
        json.dump({"kind": "cli", "reason": "r" * (5 * 1024 * 1024)}, f)
    error = fails(home, "memory", "add", "--space", "user", "--content", "x", "--provenance", f"@{path}",
                  code="invalid_params.range", exit_code=2)  # fmt: skip
    assert error["data"] == {"param": "provenance", "max_bytes": 4 * 1024 * 1024}
    title = home.cli("memory", "add", "--space", "user", "--content", "x", "--title", "-", "--json", stdin="t" * 201)
    assert title.code == 2 and title.json["error"]["data"] == {"param": "title", "max_bytes": 200}
    assert home.daemon_pid() is None  # nothing was sent, so nothing was started
    assert groups.is_group("memory") and not groups.is_group("whoami")


def test_a_hook_started_in_the_root_reads_no_project(home: Home) -> None:
    """Before, `/` was `project/root`: a hook there recalled whatever that space held."""
    home.ok("memory", "add", "--space", "project/root", "--content", "zqx root project rule", "--kind", "convention")
    home.ok("memory", "add", "--space", "user", "--content", "zqx user rule", "--kind", "convention")
    payload = json.dumps({"session_id": "s-root", "cwd": "/", "source": "startup"})
    result = home.cli("hook", "session-start", stdin=payload, token=None)
    assert result.code == 0 and result.err == ""
    context = json.loads(result.out)["hookSpecificOutput"]["additionalContext"]
    assert "zqx user rule" in context and "zqx root project rule" not in context


GRANTS = '[{"right": "read", "scope": "space:user"}]'


def test_a_stale_revision_and_a_taken_client_name_say_what_to_do_at_a_terminal(home: Home) -> None:
    made = home.ok("memory", "add", "--space", "user", "--content", "the build uses make")
    home.ok("memory", "update", "--id", made["id"], "--revision", "1", "--content", "the build uses just")
    stale = home.cli("memory", "update", "--id", made["id"], "--revision", "1", "--content", "the build uses ninja")
    assert stale.code == 5, stale
    assert "error: conflict.memory_revision" in stale.err
    assert "fix: read it again (hivemem memory get --id ID) and retry with --revision 2" in stale.err
    home.ok("client", "add", "--name", "codex", "--grants", GRANTS)
    taken = home.cli("client", "add", "--name", "codex", "--grants", GRANTS)
    assert taken.code == 5, taken
    assert "fix: choose another --name, or first: hivemem client remove --name codex" in taken.err
    as_json = home.cli("client", "add", "--name", "codex", "--grants", GRANTS, "--json")
    assert as_json.json["error"]["data"] == {"client": "codex"}, "the wire data stays as it was"
