"""The review UI with a team store mounted (docs/ui.md, docs/team.md; D398, D399): a real daemon with its SQLite store
and a team store on a real PostgreSQL server, a real `hivemem ui` process and Debian's Chromium driven by Playwright.
The memory list and search say each memory's store and switch between all, personal and team; a team memory's
`t:m<N>` id works in links and in every action, under the UI's CSRF rule; the health page shows both stores.

`UI_SCREENSHOTS=DIR` also writes DIR/team-<page>-<width>.png, at 1280 and 420 px.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from conftest import Home
from test_team_federation import Team, free_port, person, team, via
from test_web import UI, start_ui, stop_ui
from test_web_pages import BROKEN_WORDS, WIDER_THAN_WINDOW, browser, tab

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = ["browser", "team"]  # fixtures used by name
WIDTHS = (1280, 420)
# What sticks out past the window, outside the tables (which scroll in their own box): said when the page scrolls.
WIDEST = """() => [...document.querySelectorAll('main *')]
  .filter(e => !e.closest('div.table') && e.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 5).map(e => e.tagName + ' ' + Math.round(e.getBoundingClientRect().right))"""


def shoot(page: Page, name: str, width: int, home: Home) -> None:
    """Words stay whole in tables and the page never scrolls sideways; then the shot, when asked for."""
    target = os.environ.get("UI_SCREENSHOTS")
    if target:
        mask = [page.locator("td", has_text=home.base), page.locator("dd", has_text=home.base)]
        page.screenshot(path=os.path.join(target, f"team-{name}-{width}.png"), full_page=True, mask=mask,
                        mask_color="#d8d8d8")  # fmt: skip
    assert page.evaluate(BROKEN_WORDS) == [], (name, width)
    wide = page.evaluate(WIDEST)
    assert page.evaluate(WIDER_THAN_WINDOW) <= 0, (name, width, "the page never scrolls sideways", wide)


@pytest.fixture
def ana(team: Team) -> Iterator[tuple[Home, UI, list[str], list[str]]]:
    """Ana's machine with the team store mounted, two memories in each store, and her review UI."""
    with person(team.url, team.tokens["ana"]) as h:
        mine = [
            h.ok("memory", "add", "--space", "user", "--content", "ana prefers small pull requests")["id"],
            h.ok("memory", "add", "--space", "project/web", "--content", "the web project deploys on fridays")["id"],
        ]
        theirs = [
            h.ok("memory", "add", "--space", "team/platform", "--content", "deploys go blue-green via argo")["id"],
            h.ok("memory", "add", "--space", "team/platform", "--kind", "convention", "--content",
                 "every deploy needs a canary stage")["id"],
        ]  # fmt: skip
        running = start_ui(h)
        try:
            yield h, running, mine, theirs
        finally:
            code, err = stop_ui(running)
            assert code == 0 and "Traceback" not in err, err


def stores(page: Page) -> list[tuple[str, str]]:
    """(id, store) of each row of the memory table."""
    headers = page.locator("main table thead th").all_inner_texts()
    at = headers.index("store")
    rows = page.locator("main table tbody tr")
    return [(r.locator("td").nth(0).inner_text(), r.locator("td").nth(at).inner_text()) for r in rows.all()]


def test_the_memory_list_and_search_show_each_store_and_switch_between_them(
    browser: Browser, ana: tuple[Home, UI, list[str], list[str]]
) -> None:
    h, ui, mine, theirs = ana
    page = tab(browser, ui, WIDTHS[0])  # the login link works once: one session for every width
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(ui.origin + "/search")
            assert page.locator("main table thead th").all_inner_texts()[:3] == ["id", "space", "store"]
            assert stores(page) == [(mine[1], "personal"), (mine[0], "personal"), (theirs[1], "team"),
                                    (theirs[0], "team")]  # fmt: skip
            assert page.locator("select[name=store] option").all_inner_texts() == ["all", "personal", "team"]
            shoot(page, "list", width, h)

            page.select_option("select[name=store]", "team")
            page.get_by_role("button", name="Search").click()
            assert "store=team" in page.url
            assert stores(page) == [(theirs[1], "team"), (theirs[0], "team")]
            assert page.locator("select[name=store]").input_value() == "team"
            page.select_option("select[name=store]", "personal")
            page.get_by_role("button", name="Search").click()
            assert stores(page) == [(mine[1], "personal"), (mine[0], "personal")]

            page.fill("input[name=q]", "fridays argo")
            page.select_option("select[name=store]", "")
            page.get_by_role("button", name="Search").click()
            assert sorted(stores(page)) == [(mine[1], "personal"), (theirs[0], "team")]
            shoot(page, "search", width, h)
            page.select_option("select[name=store]", "team")
            page.get_by_role("button", name="Search").click()
            assert stores(page) == [(theirs[0], "team")]
    finally:
        page.context.close()


def test_the_switch_pages_through_the_team_store(browser: Browser, ana: tuple[Home, UI, list[str], list[str]]) -> None:
    h, ui, _, theirs = ana
    more = [h.ok("memory", "add", "--space", "team/ops", "--content", f"team runbook {n}")["id"] for n in range(60)]
    page = tab(browser, ui, 1280)
    try:
        page.goto(ui.origin + "/search?store=team")
        first = [i for i, _ in stores(page)]
        assert len(first) == 50 and first[0] == more[-1]
        assert "continue the personal store" not in page.inner_text("main")
        page.get_by_role("link", name="Older →").click()
        rest = [i for i, _ in stores(page)]
        assert rest == [*more[:10][::-1], theirs[1], theirs[0]], rest  # the team store's older memories, none lost
        page.goto(ui.origin + "/search")  # both stores: the pager goes on in both (D401), each memory once
        seen = [i for i, _ in stores(page)]
        while page.get_by_role("link", name="Older →").count():
            page.get_by_role("link", name="Older →").click()
            seen += [i for i, _ in stores(page)]
        assert len(seen) == len(set(seen)) and set(more) | set(theirs) <= set(seen), seen
    finally:
        page.context.close()


def test_a_team_memory_opens_edits_and_deletes_by_its_t_id_under_the_csrf_rule(
    browser: Browser, ana: tuple[Home, UI, list[str], list[str]]
) -> None:
    h, ui, _, theirs = ana
    mid = theirs[0]
    assert mid.startswith("t:m")
    page = tab(browser, ui, 1280)
    try:
        page.goto(ui.origin + "/search?store=team")
        page.get_by_role("link", name=mid, exact=True).click()
        assert page.url.split("?")[0].endswith("/memory/" + mid.replace(":", "%3A"))
        assert page.locator("h1").inner_text() == f"Memory {mid}"
        assert "store team" in page.locator(".facts").inner_text()
        assert "deploys go blue-green via argo" in page.inner_text("pre.content")
        assert "memory.added" in page.inner_text("main")  # its audit trail, read from the team store

        page.get_by_text("Edit", exact=True).click()
        page.fill("textarea[name=content]", "deploys go blue-green via argo rollouts")
        page.get_by_role("button", name="Save", exact=True).click()
        assert f"Saved: {mid} is now at revision 2." in page.inner_text(".notice")
        assert h.ok("memory", "get", "--id", mid)["content"] == "deploys go blue-green via argo rollouts"

        # a change without this session's CSRF token is refused, whichever store the memory is in
        (cookie,) = page.context.cookies()
        sent = {"Cookie": f"{cookie['name']}={cookie['value']}", "Origin": ui.origin,
                "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip
        forged = ui.request("POST", "/memory/" + mid.replace(":", "%3A") + "/delete", body="revision=2", headers=sent)
        assert forged.status == 403 and "security token" in forged.body, forged
        assert not h.ok("memory", "get", "--id", mid).get("deleted")

        page.get_by_role("button", name="Delete (restorable)").click()
        assert f"Deleted {mid}" in page.inner_text(".notice")
        assert h.ok("memory", "get", "--id", mid, "--include-deleted")["deleted"]
        page.get_by_role("button", name="Restore").click()
        assert f"Restored {mid}." in page.inner_text(".notice")
        assert not h.ok("memory", "get", "--id", mid).get("deleted")
        shoot(page, "memory", 1280, h)
        page.get_by_role("button", name="Compare").click()
        assert page.locator("h1").inner_text() == f"Memory {mid}: revision 1 → 4"
        page.get_by_role("link", name=f"Back to {mid}").click()
        assert page.locator("h1").inner_text() == f"Memory {mid}"
    finally:
        page.context.close()


def test_the_health_page_shows_both_stores(browser: Browser, ana: tuple[Home, UI, list[str], list[str]]) -> None:
    h, ui, _, _ = ana
    page = tab(browser, ui, WIDTHS[0])
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(ui.origin + "/health")
            section = page.locator("#stores")
            assert section.locator("thead th").all_inner_texts() == ["", "personal", "team"]
            rows = {r.locator("td").nth(0).inner_text(): r.locator("td").all_inner_texts()[1:]
                    for r in section.locator("tbody tr").all()}  # fmt: skip
            assert rows["Memories"] == ["2", "2"], rows
            assert rows["Sqlite version"][1].startswith("PostgreSQL "), rows
            assert rows["Spaces"] == ["", "team/*"] and rows["Server"][1], rows
            shoot(page, "health", width, h)
    finally:
        page.context.close()


def cells(page: Page, column: str) -> list[tuple[str, str]]:
    """(the first cell, the `column` cell) of each row of the page's table."""
    headers = page.locator("main table thead th").all_inner_texts()
    at = headers.index(column)
    rows = page.locator("main table tbody tr")
    return [(r.locator("td").nth(0).inner_text(), r.locator("td").nth(at).inner_text()) for r in rows.all()]


def encoded(mid: str) -> str:
    return "/memory/" + mid.replace(":", "%3A")


def test_the_hygiene_page_says_each_findings_store_and_fixes_a_team_duplicate(
    browser: Browser, ana: tuple[Home, UI, list[str], list[str]]
) -> None:
    h, ui, mine, theirs = ana
    copy = h.ok("memory", "add", "--space", "team/platform", "--content", "Deploys go blue-green via Argo!")["id"]
    own = h.ok("memory", "add", "--space", "user", "--content", "Ana prefers small pull requests!")["id"]
    page = tab(browser, ui, WIDTHS[0])
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(ui.origin + "/hygiene")
            headers = page.locator("main table thead th").all_inner_texts()
            assert headers == ["finding", "memories", "space", "store", "why", "fix"], headers
            found = [(r.locator("td").nth(1).inner_text(), r.locator("td").nth(3).inner_text())
                     for r in page.locator("main table tbody tr").all()]  # fmt: skip
            assert found == [(f"{mine[0]} {own}", "personal"), (f"{theirs[0]} {copy}", "team")], found
            assert "2 duplicates in 6 memories" in page.inner_text("main")
            row = page.locator("main table tbody tr", has_text=theirs[0])
            assert f"Mark {theirs[0]} as superseded by {copy}" in row.inner_text()
            link = row.get_by_role("link", name=theirs[0], exact=True)
            assert link.get_attribute("href") == encoded(theirs[0])
            shoot(page, "hygiene", width, h)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.locator("main table tbody tr", has_text=theirs[0]).get_by_role("button", name="Preview").click()
        assert "Nothing has changed yet" in page.inner_text("main")
        assert h.ok("memory", "get", "--id", theirs[0])["status"] == "active", "a preview writes nothing"
        page.get_by_role("button", name="Apply: superseded").click()
        assert page.url.split("?")[0].endswith(encoded(theirs[0]))
        assert h.ok("memory", "get", "--id", theirs[0])["status"] == "archived"
        assert h.ok("memory", "get", "--id", mine[0])["status"] == "active"
        page.goto(ui.origin + "/hygiene")
        assert cells(page, "store") == [("Duplicate", "personal")]
    finally:
        page.context.close()


def test_the_review_queue_and_drafts_say_each_memorys_store_and_act_on_team_ones(
    browser: Browser, ana: tuple[Home, UI, list[str], list[str]]
) -> None:
    h, ui, _, _ = ana
    due = ("--review-after", "2020-01-01T00:00:00Z")
    mine = h.ok("memory", "add", "--space", "user", "--content", "ana's laptop runs the nightly", *due)["id"]
    ours = h.ok("memory", "add", "--space", "team/platform", "--content", "the staging db is pg 15", *due)["id"]
    draft = h.ok("memory", "capture", "--space", "user", "--content", "ana uses fish as her shell")["id"]
    shared = h.ok("memory", "capture", "--space", "team/platform", "--content", "releases are cut on tuesdays")["id"]
    assert ours.startswith("t:m") and shared.startswith("t:m")
    page = tab(browser, ui, WIDTHS[0])
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(ui.origin + "/review")
            assert page.locator("main table thead th").all_inner_texts()[:3] == ["id", "space", "store"]
            assert cells(page, "store") == [(mine, "personal"), (ours, "team")]
            link = page.get_by_role("link", name=ours, exact=True)
            assert link.get_attribute("href") == encoded(ours)
            shoot(page, "review", width, h)
            page.goto(ui.origin + "/drafts")
            assert page.locator("main table thead th").all_inner_texts()[:3] == ["id", "space", "store"]
            assert sorted(cells(page, "store")) == sorted([(draft, "personal"), (shared, "team")])
            assert page.get_by_role("link", name=shared, exact=True).get_attribute("href") == encoded(shared)
            shoot(page, "drafts", width, h)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.locator("main table tbody tr", has_text=shared).get_by_role("button", name="Confirm").click()
        assert h.ok("memory", "get", "--id", shared)["status"] == "active"
        assert cells(page, "store") == [(draft, "personal")]
        page.goto(ui.origin + "/review")
        page.locator("main table tbody tr", has_text=ours).get_by_role("button", name="Challenge").click()
        assert h.ok("memory", "get", "--id", ours)["confidence_state"] == "user_confirmed"  # still_valid, first
        page.goto(ui.origin + "/review")
        assert cells(page, "store") == [(mine, "personal")]
        page.get_by_role("link", name=mine, exact=True).click()
        assert page.locator("h1").inner_text() == f"Memory {mine}"
    finally:
        page.context.close()


def test_with_the_team_store_stopped_the_ui_says_so_and_shows_the_personal_store(team: Team, browser: Browser) -> None:
    with person(via(team.url, free_port()), team.tokens["ana"], timeout_ms=1000) as h:
        own = h.ok("memory", "add", "--space", "user", "--content", "ana prefers small pull requests")["id"]
        ui = start_ui(h)
        page = tab(browser, ui, 1280)
        try:
            page.goto(ui.origin + "/search")
            assert "The team store did not answer in time" in page.inner_text("main")
            assert stores(page) == [(own, "personal")]
            page.goto(ui.origin + "/health")
            assert "The team store did not answer within team.timeout_ms" in page.inner_text("#stores")
            assert re.search(r"Memories\s+1", page.inner_text("#stores"))
            h.ok("memory", "add", "--space", "user", "--content", "Ana prefers small pull requests!")
            page.goto(ui.origin + "/hygiene")
            said = "The team store did not answer in time: only the personal store's findings are shown."
            assert said in page.inner_text("main")
            assert cells(page, "store") == [("Duplicate", "personal")]
        finally:
            page.context.close()
            code, err = stop_ui(ui)
            assert code == 0 and "Traceback" not in err, err


def test_without_a_team_store_the_ui_has_no_switch_and_no_store_column(home: Home, browser: Browser) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "plain personal memory")
    home.ok("memory", "add", "--space", "user", "--content", "Plain personal memory!")
    home.ok("memory", "add", "--space", "user", "--content", "due one", "--review-after", "2020-01-01T00:00:00Z")
    home.ok("memory", "capture", "--space", "user", "--content", "a draft to confirm")
    ui = start_ui(home)
    page = tab(browser, ui, 1280)
    try:
        page.goto(ui.origin + "/search")
        assert page.locator("select[name=store]").count() == 0
        assert page.locator("main table thead th").all_inner_texts()[:3] == ["id", "space", "kind"]
        page.goto(ui.origin + "/hygiene")
        assert page.locator("main table thead th").all_inner_texts() == ["finding", "memories", "space", "why", "fix"]
        for path in ("/review", "/drafts"):
            page.goto(ui.origin + path)
            assert page.locator("main table thead th").all_inner_texts()[:3] == ["id", "space", "kind"], path
        assert "did not answer" not in page.inner_text("main")
        page.goto(ui.origin + "/health")
        assert page.locator("#stores").count() == 0 and page.locator("h2", has_text="Store").count() >= 1
    finally:
        page.context.close()
        code, err = stop_ui(ui)
        assert code == 0 and "Traceback" not in err, err
