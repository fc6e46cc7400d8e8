"""memory.search (docs/search.md): query text is never FTS5 syntax, the stopword rule, ranking and hit shapes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Home, Result, isolated_home
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

MAX_QUERY_BYTES = 8192
HIT_KEYS = {"id", "space", "kind", "tags", "status", "confidence", "revision", "author", "updated_by", "created",
            "updated", "snippet", "score", "fts_rank"}  # fmt: skip


@pytest.fixture
def client(owner: DaemonClient) -> DaemonClient:
    return owner


def add(client: DaemonClient, content: str, space: str = "user", **fields: Any) -> str:
    result = client.call("memory.add", space=space, content=content, **fields)
    assert result["changed"] is True
    return str(result["id"])


def ids(client: DaemonClient, query: str, **params: Any) -> list[str]:
    return [hit["id"] for hit in client.call("memory.search", query=query, **params)["results"]]


def error_code(client: DaemonClient, verb: str, **params: Any) -> str:
    with pytest.raises(HivememError) as caught:
        client.call(verb, **params)
    return caught.value.code


# C05: FTS5 syntax in a query is plain text, never an error.

FTS_SYNTAX = [
    '"', '""', '"zebra', 'zebra"', "*", "zebra*", "*zebra", "NEAR(", "NEAR(zebra horse)", "NEAR(zebra horse, 2)",
    "-", "-zebra", "zebra -horse", "AND", "OR", "NOT", "zebra AND", "OR zebra", "zebra NOT horse", "(", ")",
    "(zebra", "zebra)", "(zebra OR horse)", ":", "title:zebra", "content:zebra", "tags:zebra", "{title}: zebra",
    "{title content}:zebra", "^", "^zebra", "{", "}", "+zebra", "zebra + horse", "'", "zebra'", "\\", "\\\"",
    "a:b:c", "rowid:1", "memory_fts:zebra", "*)(\"'-:^{}", "NEAR", "zebra NEAR horse", "AND OR NOT",
]  # fmt: skip


@pytest.fixture(scope="module")
def shared() -> Iterator[Home]:
    """One home for read-only query cases: m1 titled zebra, m2 punctuation only."""
    with isolated_home() as home:
        home.ok("memory", "add", "--space", "user", "--title", "zebra", "--content", "a zebra and a horse")
        home.ok("memory", "add", "--space", "user", "--content", '* ( " ) -- :: … ^ punctuation only')
        yield home


def cli_search(home: Home, query: str) -> Result:
    # `-` on the command line means "read stdin", so that query travels through stdin; `--query=X` because
    # argparse would take a separate `-zebra` for an option.
    if query == "-":
        return home.cli("memory", "search", "--query", "-", "--json", stdin=query)
    return home.cli("memory", "search", f"--query={query}", "--json")


@pytest.mark.parametrize("query", FTS_SYNTAX)
def test_fts5_syntax_is_plain_text_never_an_error(shared: Home, query: str) -> None:
    result = cli_search(shared, query)
    assert result.code == 0, result
    assert result.json["mode"] == "fts"
    found = [h["id"] for h in result.json["results"]]
    if any(re.findall(r"\w+", token.lower()) in (["zebra"], ["horse"]) for token in query.split()):
        assert "m1" in found  # a plain word next to the syntax still matches as a word
    if query.partition(":")[0] in ("title", "content", "tags", "memory_fts"):
        assert found == ["m1"]  # as text, its word runs; as a column filter, `tags:zebra` would match nothing


def test_column_filter_is_text_not_a_filter(client: DaemonClient) -> None:
    titled = add(client, "nothing relevant here", title="foo")
    phrase = add(client, "the title foo is written in the body")
    body = add(client, "foo in the body only")
    assert set(ids(client, "title:foo")) == {titled, phrase, body}  # the words `title` and `foo`, OR-ed
    assert ids(client, "title:foo")[0] == phrase  # the only one holding both words


def test_minus_is_not_negation(client: DaemonClient) -> None:
    zebra = add(client, "a zebra grazing")
    horse = add(client, "a horse grazing")
    assert set(ids(client, "zebra -horse")) == {zebra, horse}


def test_star_is_not_a_prefix_operator(client: DaemonClient) -> None:
    add(client, "a zebra grazing")
    assert ids(client, "zeb*") == []
    assert ids(client, "zeb") == []


def test_near_and_parentheses_are_words(client: DaemonClient) -> None:
    horse = add(client, "a horse grazing")
    add(client, "a giraffe grazing")
    assert ids(client, "NEAR(zebra horse)") == [horse]
    assert ids(client, "(horse)") == [horse]


def test_and_or_not_are_words_not_operators(client: DaemonClient) -> None:
    zebra = add(client, "a zebra grazing")
    horse = add(client, "a horse grazing")
    # As operators, AND would require both and NOT would exclude horse; as words they are dropped stopwords.
    assert set(ids(client, "zebra AND horse")) == {zebra, horse}
    assert set(ids(client, "zebra NOT horse")) == {zebra, horse}


def test_double_quote_inside_a_token_is_escaped(client: DaemonClient) -> None:
    zebra = add(client, 'he said "zebra" loudly')
    assert ids(client, '"zebra"') == [zebra]
    assert ids(client, 'say"zebra') == [zebra]  # split at the inner quote: `say` OR `zebra`
    assert ids(client, 'said"zebra') == [zebra]


def test_nul_and_control_characters_in_a_query_are_not_errors(client: DaemonClient) -> None:
    zebra = add(client, "a zebra grazing")
    assert ids(client, "zebra\x00") == [zebra]
    assert ids(client, "\x00zebra\x01") == [zebra]
    assert client.call("memory.search", query="\x00")["results"] == []


# Hypothesis: any text is ok, or invalid_params.query (blank) / invalid_params.range (too long).

SYNTAXY = st.text(alphabet=st.sampled_from(list("\"*()-:^{}+\\' \t\nzebraNEARORANDNOTtitle")), max_size=40)
LONG = st.integers(MAX_QUERY_BYTES - 3, MAX_QUERY_BYTES + 3).map(lambda n: "zebra " + "x" * (n - 6))
QUERIES = st.one_of(st.text(), st.text(min_size=1, max_size=200), SYNTAXY, st.sampled_from(FTS_SYNTAX), LONG)


def expected_error(query: str) -> str | None:
    if len(query.encode("utf-8")) > MAX_QUERY_BYTES:
        return "invalid_params.range"
    if not query.strip():
        return "invalid_params.query"
    return None


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES)
def test_any_query_text_is_ok_or_a_named_error(seeded: DaemonClient, query: str) -> None:
    try:
        result = seeded.call("memory.search", query=query, limit=5)
    except HivememError as exc:
        assert exc.code == expected_error(query), (query, exc.code, exc.data)
        assert exc.data.get("param") == "query"
        return
    assert expected_error(query) is None, query
    assert result["mode"] == "fts"
    hits = result["results"]
    assert len(hits) <= 5
    assert [h["fts_rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert all(h["score"] == pytest.approx(1 / (60 + h["fts_rank"])) for h in hits)


@pytest.fixture
def seeded(client: DaemonClient) -> DaemonClient:
    texts = ["a zebra and a horse", 'quote " star * paren ( colon : caret ^ brace {', "title foo bar",
             "NEAR AND OR NOT words", "ünïcödé ñame 日本語 テキスト", "under_score and-dash", "the"]  # fmt: skip
    for i, text in enumerate(texts):
        add(client, text, title=f"t{i} zebra" if i % 2 else "", tags=["zebra"] if i % 3 == 0 else [])
    return client


# The stopword rule of docs/search.md.


def test_query_of_only_stopwords_searches_with_them(client: DaemonClient) -> None:
    the = add(client, "the cat sat")
    add(client, "zebra grazing")
    assert ids(client, "the") == [the]
    assert ids(client, "The") == [the]
    assert ids(client, "the and of") == [the]


def test_stopwords_are_dropped_when_other_words_exist(client: DaemonClient) -> None:
    add(client, "the cat sat")
    zebra = add(client, "a zebra grazing")
    assert ids(client, "the zebra") == [zebra]
    assert ids(client, "THE zebra OF") == [zebra]


def test_a_token_of_only_stopword_runs_is_a_stopword(client: DaemonClient) -> None:
    dont = add(client, "don't touch")
    zebra = add(client, "zebra grazing")
    assert ids(client, "don't zebra") == [zebra]
    assert ids(client, "don't") == [dont]


def test_tokens_without_word_characters_are_dropped(client: DaemonClient) -> None:
    zebra = add(client, "zebra grazing")
    assert ids(client, 'zebra * ( " -') == [zebra]


@pytest.mark.parametrize("query", ["*", '"', "(", ")", "-", '* ( " ) -- ::', "…", "^"])
def test_query_without_word_characters_matches_nothing(shared: Home, query: str) -> None:
    result = cli_search(shared, query)
    assert result.code == 0, result
    assert result.json == {"mode": "fts", "results": []}


@pytest.mark.parametrize("query", ["", " ", "   \t\n ", "\u3000", "\u2028"])
def test_blank_query_is_invalid_params_query(shared: Home, query: str) -> None:
    result = shared.cli("memory", "search", "--query", query, "--json")
    assert result.code == 2, result
    assert result.json["error"]["code"] == "invalid_params.query"
    assert result.json["error"]["data"]["param"] == "query"
    human = shared.cli("memory", "search", "--query", query)
    assert human.code == 2
    assert "invalid_params.query" in human.err


def test_query_length_bound(client: DaemonClient) -> None:
    zebra = add(client, "zebra grazing")
    assert ids(client, "zebra " + "y" * (MAX_QUERY_BYTES - 6)) == [zebra]
    with pytest.raises(HivememError) as caught:
        client.call("memory.search", query="zebra " + "y" * (MAX_QUERY_BYTES - 5))
    assert caught.value.code == "invalid_params.range"
    assert caught.value.data["param"] == "query"


# Ranking, hit shape and filters.


def test_hit_shape_and_scores(client: DaemonClient) -> None:
    for i in range(3):
        add(client, f"zebra number {'x' * i} grazing in field {i}", title="herd", tags=["animals"])
    result = client.call("memory.search", query="zebra")
    assert result["mode"] == "fts"
    assert "fallback" not in result
    hits = result["results"]
    assert len(hits) == 3
    for rank, hit in enumerate(hits, start=1):
        assert set(hit) == HIT_KEYS | {"title"}
        assert hit["fts_rank"] == rank
        assert hit["score"] == pytest.approx(1 / (60 + rank), abs=1e-12)
        assert "zebra" in hit["snippet"]
        assert hit["title"] == "herd"
        assert hit["tags"] == ["animals"]


def test_snippet_is_an_fts_excerpt_around_the_match(client: DaemonClient) -> None:
    words = " ".join(f"filler{i}" for i in range(200))
    add(client, f"{words} zebra {words}")
    (hit,) = client.call("memory.search", query="zebra")["results"]
    assert "zebra" in hit["snippet"]
    assert "…" in hit["snippet"]
    assert len(hit["snippet"]) < 1000


def test_title_outranks_tags_outranks_content(client: DaemonClient) -> None:
    title = add(client, "alpha beta", title="zebra")
    tags = add(client, "alpha gamma", tags=["zebra"])
    content = add(client, "zebra alpha delta")
    # Each document has three tokens, so only the column weights (5, 3, 1) separate them; ids would favour `content`.
    assert ids(client, "zebra") == [title, tags, content]


def test_equal_scores_order_by_highest_id(client: DaemonClient) -> None:
    first = add(client, "zebra kappa")
    second = add(client, "zebra omega")
    third = add(client, "zebra sigma")
    assert ids(client, "zebra") == [third, second, first]


def test_more_matching_words_rank_higher(client: DaemonClient) -> None:
    both = add(client, "zebra horse field")
    one = add(client, "zebra cow field")
    assert ids(client, "zebra horse") == [both, one]


def test_limit_bounds_and_default(client: DaemonClient) -> None:
    for i in range(12):
        add(client, f"zebra number {i}")
    assert len(ids(client, "zebra")) == 10
    assert len(ids(client, "zebra", limit=3)) == 3
    assert len(ids(client, "zebra", limit=100)) == 12
    assert error_code(client, "memory.search", query="zebra", limit=0) == "invalid_params.range"
    assert error_code(client, "memory.search", query="zebra", limit=101) == "invalid_params.range"


def test_filters_spaces_kinds_tags(client: DaemonClient) -> None:
    a = add(client, "zebra one", space="project/a", kind="fact", tags=["x", "y"])
    b = add(client, "zebra two", space="project/b", kind="decision", tags=["x"])
    c = add(client, "zebra three", space="user", kind="fact", tags=["y"])
    assert set(ids(client, "zebra", spaces=["project/a", "user"])) == {a, c}
    assert set(ids(client, "zebra", kinds=["fact"])) == {a, c}
    assert set(ids(client, "zebra", tags=["x"])) == {a, b}
    assert ids(client, "zebra", tags=["x", "y"]) == [a]
    assert ids(client, "zebra", spaces=["project/b"], kinds=["fact"]) == []
    assert ids(client, "zebra", spaces=["nowhere"]) == []


def test_ranks_count_only_filtered_rows(client: DaemonClient) -> None:
    add(client, "zebra", title="zebra zebra", space="project/a")
    other = add(client, "zebra grazing somewhere far", space="user")
    hits = client.call("memory.search", query="zebra", spaces=["user"])["results"]
    assert [(h["id"], h["fts_rank"]) for h in hits] == [(other, 1)]
    assert hits[0]["score"] == pytest.approx(1 / 61)


def test_deleted_and_updated_memories_leave_the_index(client: DaemonClient) -> None:
    gone = add(client, "zebra to delete")
    changed = add(client, "zebra to change")
    client.call("memory.delete", id=gone, revision=1)
    client.call("memory.update", id=changed, revision=1, content="horse now")
    assert ids(client, "zebra") == []
    assert ids(client, "horse") == [changed]
    client.call("memory.restore", id=gone)
    assert ids(client, "zebra") == [gone]


def test_unknown_reads_only_granted_spaces_and_ranks_skip_the_rest(home: Home) -> None:
    home.config('[grants]\nunknown = [{ right = "read", scope = "space:user" }]\n')
    home.ok("memory", "add", "--space", "project/secret", "--title", "zebra", "--content", "zebra zebra")
    mine = home.ok("memory", "add", "--space", "user", "--content", "zebra in the user space")["id"]
    found = home.ok("memory", "search", "--query", "zebra", token=None)
    assert [(h["id"], h["fts_rank"]) for h in found["results"]] == [(mine, 1)]
    refused = home.cli("memory", "search", "--query", "zebra", "--spaces", "project/secret", "--json", token=None)
    assert refused.code == 4
    assert refused.json["error"]["code"] == "denied.read"


def test_search_through_cli_with_array_forms(home: Home) -> None:
    a = home.ok("memory", "add", "--space", "project/a", "--content", "zebra a", "--tags", "x,y")["id"]
    home.ok("memory", "add", "--space", "project/b", "--content", "zebra b", "--tags", "x")
    comma = home.ok("memory", "search", "--query", "zebra", "--spaces", "project/a,user", "--tags", "y")
    as_json = home.ok("memory", "search", "--query", "zebra", "--spaces", '["project/a","user"]', "--tags", '["y"]')
    assert [h["id"] for h in comma["results"]] == [a]
    assert comma == as_json


def test_vector_mode_with_embeddings_off_is_unsupported(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "zebra")
    result = home.cli("memory", "search", "--query", "zebra", "--mode", "vector", "--json")
    assert result.code == 10
    assert result.json["error"]["code"] == "unsupported.embeddings_off"
    assert home.ok("memory", "search", "--query", "zebra", "--mode", "fts")["mode"] == "fts"


def test_rrf_reproduces_the_spec_fixture() -> None:
    """docs/search.md: FTS list [m2, m1] and vector list [m3, m2] fuse to m2, m3, m1 with these scores."""
    from hivemem.search.fuse import rrf

    fused = rrf({"fts_rank": [2, 1], "vector_rank": [3, 2]})
    assert [(m, round(s, 8)) for m, s, _ in fused] == [(2, 0.03252247), (3, 0.01639344), (1, 0.01612903)]
    assert fused[0][2] == {"fts_rank": 1, "vector_rank": 2}
    assert [m for m, _, _ in rrf({"fts_rank": [2, 1]})] == [2, 1]
