"""Text in every language (docs/search.md): CJK runs as bigrams, accents ignored, tokens split at inner punctuation,
and recall's relevance floor for them (docs/hooks.md), through the real daemon and CLI."""

from __future__ import annotations

import re

from conftest import Home
from hivemem.client import DaemonClient
from test_search import add, ids


def test_a_run_of_han_finds_a_sentence_without_spaces(home: Home, owner: DaemonClient) -> None:
    beijing = add(owner, "我们的项目使用北京的服务器部署")
    found = home.ok("memory", "search", "--query", "北京")["results"]
    assert [h["id"] for h in found] == [beijing]
    assert found[0]["snippet"] == "我们的项目使用北京的服务器部署"


def test_contiguous_ranks_first_partial_lower_apart_never(owner: DaemonClient) -> None:
    whole = add(owner, "上海的数据库备份每天执行")
    partial = add(owner, "数据很重要，备用方案也要有")  # shares 数据 only
    apart = add(owner, "北方的天气很冷，京剧很好看")  # 北 and 京, never side by side
    beijing = add(owner, "服务器在北京")
    assert ids(owner, "数据库备份") == [whole, partial]
    assert ids(owner, "北京") == [beijing]
    assert ids(owner, "天气") == [apart]  # it is indexed, just not as 北京


def test_a_natural_prompt_without_spaces_finds_its_answer(owner: DaemonClient) -> None:
    backup = add(owner, "数据库备份每天凌晨三点执行")
    add(owner, "前端使用React和TypeScript")
    assert ids(owner, "怎么做数据库备份")[0] == backup


def test_japanese_and_korean(owner: DaemonClient) -> None:
    ramen = add(owner, "ラーメン屋の予約システムは別のリポジトリ")  # ー, the prolonged sound mark, inside the run
    tower = add(owner, "東京タワーの近くのオフィス")
    seoul = add(owner, "서울에서 만나는 회의는 월요일")
    assert ids(owner, "ラーメン") == [ramen]
    assert ids(owner, "タワー") == [tower]
    assert ids(owner, "서울") == [seoul]
    assert ids(owner, "ｶﾀｶﾅ") == []  # halfwidth Katakana is indexed too, as its own characters


def test_a_single_character_run_is_itself(owner: DaemonClient) -> None:
    alone = add(owner, "Version 2号 is out")  # 号 alone between Latin letters: a run of one
    add(owner, "号码是多少")  # 号 inside a run: only its bigrams are indexed
    assert ids(owner, "号") == [alone]


def test_accents_and_inner_punctuation(owner: DaemonClient) -> None:
    cafe = add(owner, "Meet at the café near the station")
    bike = add(owner, "She bought a bike last spring")
    degree = add(owner, "He holds a bachelor degree in physics")
    assert ids(owner, "cafe") == [cafe]
    assert ids(owner, "CAFÉ") == [cafe]
    assert ids(owner, "bike-related questions") == [bike]  # `bike` OR `related` OR `questions`
    assert ids(owner, "Bachelor's") == [degree]  # `bachelor`, and `s` (a stopword)


def test_mixed_scripts_split_at_the_script_boundary(owner: DaemonClient) -> None:
    python = add(owner, "这个服务用Python使用异步框架")
    assert ids(owner, "python") == [python]
    assert ids(owner, "异步") == [python]


def test_recall_floor_keeps_bigrams_and_drops_single_characters(owner: DaemonClient) -> None:
    beijing = add(owner, "我们的项目使用北京的服务器部署", space="user")
    recalled = owner.call("memory.recall", spaces=["user"], query="北京")
    assert recalled["count"] == 1 and f'"id":"{beijing}"' in recalled["text"]
    assert owner.call("memory.recall", spaces=["user"], query="我 的")["count"] == 0
    assert owner.call("memory.recall", spaces=["user"], query="Bachelor's")["count"] == 0  # `bachelor` unmatched


def test_the_cjk_byte_test_admits_every_cjk_character_and_no_western_punctuation() -> None:
    """`may_hold_cjk` lets the tokenizer skip the CJK regex; a CJK character it missed would be indexed as one
    word instead of bigrams, so it must admit every one, and it should turn away common Western text."""
    from hivemem.search.terms import CJK, CJK_RUN, may_hold_cjk

    for low, high in re.findall(r"(.)(?:-(.))?", CJK, re.S):
        for point in range(ord(low), ord(high or low) + 1):
            assert may_hold_cjk(chr(point).encode("utf-8")), f"U+{point:04X}"
    assert CJK_RUN.fullmatch("中文かなカナ한글")
    for text in ("café — naïve “quotes” ’", "Привет, мир", "Tiếng Việt", "Ελληνικά", "עברית", "€100 ±2 °C"):
        assert not may_hold_cjk(text.encode("utf-8")), text
