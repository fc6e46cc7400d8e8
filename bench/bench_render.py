"""Recall rendering: the readable envelope (docs/hooks.md) against ASCII-only JSON lines of the same records.

Baseline, same run, interleaved: the same render with each record line as `json.dumps(record,
ensure_ascii=True)`, which is how records were escaped before letters of every script were kept (every
non-ASCII character six characters, astral ones twelve). Measured: time per render of 8 memories (the
prompt limit) for English text with line breaks, Chinese text, and text holding hidden characters (the
slower path), and how many of the 8 memories fit the 6,000-character budget under each escaping.

Not judged by a target: the hook spends ~60 ms starting Python; a render is well under one.

    .venv/bin/python bench/bench_render.py [--rounds 15] [--renders 100]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import benchlib as bl
from hivemem import render as render_module
from hivemem.render import Bounds, escaped, render


def memory(n: int, content: str) -> dict[str, Any]:
    return {"id": f"m{n}", "revision": 1, "space": "user", "kind": "lesson", "title": "How we deploy",
            "tags": ["deploy", "ops"], "status": "active", "source": "codex:mcp", "content": content,
            "author": {"principal": "g1", "label": "codex"}}  # fmt: skip


TEXTS = {
    "english": "Deploys go through make release once the tests pass.\nThen tag the commit. " * 10,
    "chinese": "我们的项目使用北京的服务器部署，发布前先运行全部测试，然后打标签。" * 30,
    "hidden chars": "Deploy\u2028step\u200bone\u202e, then two. " * 30,
}


def ascii_line(rec: dict[str, Any]) -> str:
    return json.dumps(rec, ensure_ascii=True, separators=(",", ":"))


def with_escaper(escaper: Any, memories: list[dict[str, Any]], bounds: Bounds) -> Any:
    """The whole render, its record lines escaped by `escaper` (the module's own, or the old ASCII one)."""
    saved = render_module.escaped
    render_module.escaped = escaper
    try:
        return render(memories, ["user"], bounds)
    finally:
        render_module.escaped = saved


def per_render(fn: Any, renders: int) -> float:
    start = time.perf_counter()
    for _ in range(renders):
        fn()
    return (time.perf_counter() - start) / renders * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--renders", type=int, default=100)
    args = parser.parse_args()
    bl.print_machine("bench_render: readable recall envelope vs ASCII-only record lines")
    bounds = Bounds()
    rows = []
    for name, text in TEXTS.items():
        memories = [memory(i, text[:990] + f" {i}") for i in range(8)]
        old, new = [], []
        for _ in range(args.rounds):
            old.append(per_render(lambda m=memories: with_escaper(ascii_line, m, bounds), args.renders))
            new.append(per_render(lambda m=memories: with_escaper(escaped, m, bounds), args.renders))
        fits = (with_escaper(ascii_line, memories, bounds).count, with_escaper(escaped, memories, bounds).count)
        rows.append((name, bl.median(old), bl.median(new), bl.median(new) / bl.median(old), *fits))
    print("Microseconds per render of 8 memories of ~1,000 characters; medians over rounds.\n")
    bl.table(("text", "ascii-only us", "readable us", "ratio", "fit ascii-only", "fit readable"), rows)


if __name__ == "__main__":
    main()
