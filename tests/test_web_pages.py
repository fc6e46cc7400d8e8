"""What a person sees in the review UI: every page in a real headless Chromium at 1280 and 800 px, with a store
that has something on each page. Words in tables are never broken mid-token, timestamps read as local times, the
menu marks the page, changes leave a notice, and the pages speak in sentences (one test per item of the review).

`UI_SCREENSHOTS=docs/ui pytest tests/test_web_pages.py` writes docs/ui/<page>-1280.png and -800.png.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from conftest import Home
from test_web import CHROMIUM, REQUIRE_BROWSER, UI, memory, start_ui, stop_ui

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

WIDTHS = (1280, 800)
# A word broken across two lines: the characters of one whitespace-separated word sit on different lines. A break
# after `-` or `/` in running text is where lines may end; inside a token (ids, kinds, tags, spaces, buttons:
# `.tok`, `time`, `button`, links) it is not allowed at all.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('main table td, main table th')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode())) {
      const token = node.parentElement.closest('.tok, time, button, a, th');
      const re = /\\S+/g;
      let m;
      while ((m = re.exec(node.data))) {
        const lines = [];
        for (let i = 0; i < m[0].length; i++) {
          const r = document.createRange();
          r.setStart(node, m.index + i);
          r.setEnd(node, m.index + i + 1);
          const rect = [...r.getClientRects()].find(x => x.width > 0);
          if (rect) lines.push(Math.round(rect.bottom));
        }
        for (let i = 1; i < lines.length; i++) {
          if (lines[i] > lines[i - 1] + 2) {
            const before = m[0][i - 1];
            if (token || !'-/'.includes(before)) broken.push(m[0].slice(0, i) + '|' + m[0].slice(i));
          }
        }
      }
    }
  }
  return broken;
}"""
WIDER_THAN_WINDOW = "() => document.documentElement.scrollWidth - window.innerWidth"
# Tables that do not fit their box (which would scroll sideways): none, on these pages at these widths.
CROPPED_TABLES = (
    "() => [...document.querySelectorAll('div.table')].filter(d => d.scrollWidth > d.clientWidth + 1).length"
)


def seed(home: Home) -> None:
    """A store with something on every page: spaces, kinds, tags, versions, a draft, a due memory, hygiene
    findings, relations, a session and a client."""
    home.ok("session", "start", "--harness", "codex")
    add = ("memory", "add", "--space")
    home.ok(*add, "project/hivemem", "--kind", "procedure", "--title", "Deploy the docs site", "--tags",
            "deploy,docs", "--content", "Deploy with make deploy after the release tag is pushed; the docs site "
            "rebuilds from main within ten minutes.")  # fmt: skip
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "Deploy with make deploy after the "
            "release tag is pushed; the docs site rebuilds from main within five minutes.")  # fmt: skip
    home.ok(*add, "project/hivemem", "--kind", "fact", "--tags", "python", "--content",
            "hivemem supports Python 3.9 and newer")  # fmt: skip
    home.ok(*add, "project/hivemem", "--kind", "fact", "--tags", "python", "--content",
            "hivemem supports Python 3.11 and newer")  # fmt: skip
    home.ok(*add, "project/hivemem", "--kind", "convention", "--content", "use tabs in go files")
    home.ok(*add, "project/hivemem", "--kind", "convention", "--content", "never use tabs in go files")
    home.ok(*add, "user", "--kind", "preference", "--tags", "review", "--content",
            "Prefers small pull requests, one change each, with the reason in the description")  # fmt: skip
    home.ok(*add, "user", "--kind", "preference", "--content", "prefers small pull requests, one change each, "
            "with the reason in the description!")  # fmt: skip
    home.ok(*add, "project/hivemem", "--kind", "decision", "--content", "Review dates are set per memory",
            "--review-after", "2020-01-01T00:00:00Z")  # fmt: skip
    home.ok("memory", "capture", "--space", "project/hivemem", "--kind", "procedure", "--tags", "deploy",
            "--content", "tests run with make check before every push")  # fmt: skip
    home.ok("memory", "capture", "--space", "user", "--content", "likes terse commit messages")
    home.ok("memory", "relate", "--source", "m8", "--target", "m1", "--relation", "related")
    home.ok("client", "add", "--name", "ci-bot", "--grants", '[{"right":"read","scope":"space:project/hivemem"}]')
    home.ok("memory", "search", "--query", "deploy", "--record-usage")


PAGES = {
    "search": "/search",
    "search-results": "/search?q=deploy",
    "memory": "/memory/m1",
    "diff": "/memory/m1/diff?a=1&b=2",
    "review": "/review",
    "drafts": "/drafts",
    "draft": "/memory/m9",
    "hygiene": "/hygiene",
    "sessions": "/sessions",
    "session": "/session/s1",
    "clients": "/clients",
    "health": "/health",
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright, as in test_web.py."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        if REQUIRE_BROWSER:
            pytest.fail("HIVEMEM_REQUIRE_BROWSER=1 but Chromium is not installed (apt-get install chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def seeded(home: Home) -> Iterator[UI]:
    seed(home)
    running = start_ui(home)
    try:
        yield running
    finally:
        code, err = stop_ui(running)
        assert code == 0 and "Traceback" not in err, err


def tab(browser: Browser, ui: UI, width: int) -> Page:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(ui.login_url)
    return page


def shoot(page: Page, name: str, width: int, home: Home) -> None:
    """docs/ui/<name>-<width>.png when UI_SCREENSHOTS names a directory; this machine's paths are masked."""
    target = os.environ.get("UI_SCREENSHOTS")
    if target:
        mask = [page.locator("td", has_text=home.base), page.locator("dd", has_text=home.base)]
        page.screenshot(path=os.path.join(target, f"{name}-{width}.png"), full_page=True, mask=mask,
                        mask_color="#d8d8d8")  # fmt: skip


def check(page: Page, name: str, width: int, home: Home) -> None:
    """No word broken inside a table, no sideways scrolling, no table wider than the window; then the shot."""
    assert page.evaluate(BROKEN_WORDS) == [], (name, width)
    assert page.evaluate(WIDER_THAN_WINDOW) <= 0, (name, width, "the page never scrolls sideways")
    assert page.evaluate(CROPPED_TABLES) == 0, (name, width, "every table fits the window")
    shoot(page, name, width, home)


@pytest.mark.parametrize("width", WIDTHS)
def test_item1_every_page_keeps_words_whole_in_its_tables(home: Home, browser: Browser, seeded: UI,
                                                         width: int) -> None:  # fmt: skip
    page = tab(browser, seeded, width)
    try:
        for name, path in PAGES.items():
            reply = page.goto(seeded.origin + path)
            assert reply is not None and reply.status == 200, (path, page.inner_text("main")[:300])
            tables = page.locator("main table").count()
            assert tables or name in ("diff",), (name, "every page but the diff has a table")
            check(page, name, width, home)
        preview = page.goto(seeded.origin + "/hygiene")
        assert preview is not None
        page.locator("tr", has_text="possible contradiction").first.get_by_role("button", name="Preview").click()
        assert "Nothing has changed yet" in page.inner_text("main")
        check(page, "hygiene-preview", width, home)
        page.goto(seeded.origin + "/memory/m4")
        page.select_option("select[name=outcome]", "superseded")
        page.fill("input[name=replacement]", "m5")
        page.get_by_role("button", name="Challenge").click()
        assert "Nothing has changed yet" in page.inner_text("main")
        check(page, "challenge-preview", width, home)
        page.goto(seeded.origin + "/memory/m6")
        page.get_by_text("Edit", exact=True).click()
        page.fill("textarea[name=content]", f"Prefers small pull requests (edited at {width} px)")
        revision = str(memory(home, "m6")["revision"])
        home.ok("memory", "update", "--id", "m6", "--revision", revision, "--content", f"changed elsewhere {width}")
        page.get_by_role("button", name="Save", exact=True).click()
        assert "Nothing was overwritten" in page.inner_text("main")
        check(page, "conflict", width, home)
    finally:
        page.context.close()


def test_item2_timestamps_are_local_times_with_the_exact_value_on_hover(browser: Browser, seeded: UI) -> None:
    page = tab(browser, seeded, 1280)
    try:
        page.goto(seeded.origin + "/memory/m8")
        stamps = page.locator("main time")
        assert stamps.count() >= 4
        for i in range(stamps.count()):
            exact = stamps.nth(i).get_attribute("title") or ""
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", exact), exact
            assert stamps.nth(i).get_attribute("datetime") == exact
            shown = stamps.nth(i).inner_text()
            assert "T" not in shown and "Z" not in shown and exact not in shown, shown
        due = page.locator("dd time").last  # review after 2020-01-01T00:00:00Z, in this machine's time zone
        local = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC).astimezone()
        assert due.inner_text() == f"{local.day} {local:%b %Y}, {local:%H:%M}"
        assert "just now" in page.locator("main .facts").inner_text() or "min ago" in page.inner_text("main .facts")
    finally:
        page.context.close()


def test_item3_counts_menu_notices_drafts_queue_audit_and_favicon(home: Home, browser: Browser, seeded: UI) -> None:
    page = tab(browser, seeded, 1280)
    try:
        page.goto(seeded.origin + "/search?q=zig")
        assert "0 results" in page.inner_text("main")
        page.goto(seeded.origin + "/search?q=rebuilds")
        assert re.search(r"· 1 result\b", page.inner_text("main")), page.inner_text("main")[:400]
        for path, label in (("/search", "Search"), ("/review", "Review"), ("/drafts", "Drafts"),
                            ("/hygiene", "Hygiene"), ("/sessions", "Sessions"), ("/clients", "Clients"),
                            ("/health", "Health"), ("/memory/m1", "Search")):  # fmt: skip
            page.goto(seeded.origin + path)
            current = page.locator("header nav a[aria-current=page]")
            assert current.count() == 1 and current.inner_text() == label, path
        page.goto(seeded.origin + "/memory/m1")
        page.get_by_text("Edit", exact=True).click()
        page.fill("textarea[name=content]", "Deploy with make deploy once the release tag is pushed.")
        page.get_by_role("button", name="Save", exact=True).click()
        assert page.inner_text(".notice") == "Saved: m1 is now at revision 3."
        # the drafts queue, one page in (`after`): confirming there comes back to that same page, with a notice
        page.goto(seeded.origin + "/drafts?after=m10")
        assert page.locator("main tbody tr").count() == 1, "m9 is the one draft older than m10"
        page.get_by_role("button", name="Confirm").click()
        assert urlsplit(page.url).path == "/drafts" and "after=m10" in urlsplit(page.url).query, page.url
        assert page.inner_text(".notice").startswith("Confirmed m9")
        assert memory(home, "m9")["status"] == "active"
        page.goto(seeded.origin + "/drafts")
        page.get_by_role("button", name="Discard").click()
        assert urlsplit(page.url).path == "/drafts" and page.inner_text(".notice").startswith("Discarded m10")
        page.goto(seeded.origin + "/memory/m9")
        audit = page.locator("section", has_text="Audit trail").inner_text()
        assert "memory.confirmed" in audit and "fields:" not in audit, audit
        page.goto(seeded.origin + "/memory/m8")
        page.get_by_role("button", name="Challenge").click()  # still_valid: applied at once
        assert page.inner_text(".notice") == "Recorded m8 as still valid."
        assert page.locator("link[rel=icon]").get_attribute("href") == "/favicon.ico"
        page.goto(seeded.origin + "/memory/m1?done=saved&id=%3Cb%3Ex%3C%2Fb%3E")
        assert page.inner_text(".notice") == "Saved: the memory is now at revision 3.", "only checked values"
    finally:
        page.context.close()
    icon = seeded.get("/favicon.ico", cookie=False)
    assert icon.status == 200 and icon.headers["Content-Type"] == "image/svg+xml" and "<svg" in icon.body


def test_item4_the_hygiene_preview_says_what_it_does(browser: Browser, seeded: UI) -> None:
    page = tab(browser, seeded, 1280)
    try:
        page.goto(seeded.origin + "/hygiene")
        row = page.locator("tr", has_text="Mark m5 as contradicting m4")
        assert row.inner_text().startswith("Possible contradiction")
        python = page.locator("tr", has_text="Mark m3 as contradicting m2").inner_text()  # 3.9 and 3.11: not duplicates
        assert python.startswith("Possible contradiction") and "but for a number or version" in python, python
        row.get_by_role("button", name="Preview").click()
        main = page.inner_text("main")
        assert main.startswith("Preview: Mark m5 as contradicting m4") and "memory.relate" not in main.split("\n")[0]
        assert "Preview: Mark m5 as contradicting m4. Nothing has changed yet." in main
        call = page.locator("details.call")
        assert not call.locator("code").is_visible(), "the exact call is there for those who open it"
        call.locator("summary").click()
        assert call.locator("code").inner_text().startswith("memory.relate source=m5 target=m4 relation=contradicts")
        page.get_by_role("button", name="Apply: Mark m5 as contradicting m4").click()
        assert page.inner_text(".notice").startswith("Done: the two memories are related.")
    finally:
        page.context.close()


def test_item5_health_counts_hygiene_findings_and_labels_its_charts(browser: Browser, seeded: UI) -> None:
    page = tab(browser, seeded, 1280)
    try:
        page.goto(seeded.origin + "/health")
        hygiene = page.locator("tr", has_text="memory.hygiene")
        cells = hygiene.locator("td").all_inner_texts()
        assert cells[0] == "warn" and re.match(r"\d+ findings \(", cells[2]), cells
        hygiene.get_by_role("link", name="memory.hygiene").click()
        assert urlsplit(page.url).path == "/hygiene"
        page.goto(seeded.origin + "/health")
        for row in page.locator("main table").first.locator("tbody tr").all_inner_texts():
            status, _, message = row.split("\t")[:3]
            assert not (status == "ok" and "skipped" in message), row
        chart = page.locator("#activity figure").first
        assert "6 Nov" in chart.inner_text() or chart.locator("svg text").count() >= 5
        labels = chart.locator("svg text").all_text_contents()
        assert any(re.fullmatch(r"\d{1,2} [A-Z][a-z]{2}", t) for t in labels), labels  # the date axis
        assert any(t.startswith("max ") for t in labels), labels  # each row's scale
        numbers = page.locator("#activity table").first.locator("tbody tr").all_inner_texts()
        assert any(r.startswith("project/hivemem\t6\t6\t") for r in numbers), numbers
    finally:
        page.context.close()


def test_item6_a_memory_page_leads_with_its_text_and_separates_the_rest(browser: Browser, seeded: UI) -> None:
    page = tab(browser, seeded, 1280)
    try:
        page.goto(seeded.origin + "/memory/m1")
        facts = page.locator("main .facts").inner_text()
        for fact in ("space project/hivemem", "kind procedure", "status active", "tags deploy, docs"):
            assert fact in re.sub(r"\s+", " ", facts), facts
        order = page.evaluate("() => [...document.querySelectorAll('main > *')].map(e => e.tagName + '.' + "
                              "(e.className || '') + ':' + (e.querySelector('h2')?.innerText || ''))")  # fmt: skip
        assert order[:4] == ["H1.:", "P.trust:", "P.facts:", "PRE.content:"], order
        sections = [o.split(":", 1)[1] for o in order if o.startswith("SECTION.part")]
        assert sections == ["Review", "History", "Provenance: claims by the writer, not verified", "Relations",
                            "Audit trail", "Details", "Purge"], sections  # fmt: skip
        assert not page.locator("textarea[name=content]").is_visible(), "the edit form opens when asked"
        page.get_by_text("Edit", exact=True).click()
        assert page.locator("textarea[name=content]").is_visible()
    finally:
        page.context.close()
