"""The secret scan measured on gitleaks' own samples, and on ordinary text it must let through.

1. Coverage: `hivemem.secrets.scan` on the literal true- and false-positive samples of each gitleaks rule
   (tests/fixtures/gitleaks_samples.json.gz, written by scripts/update_gitleaks_rules.py). Targets: >= 0.95 of
   the true positives refused and every rule with a sample catching at least one; <= 0.05 of the false
   positives refused, not counting the ones the fixture's exclusions list (a real secret of another rule, or a
   placeholder), which are shown apart.
2. Ordinary text: the benign corpora of tests/secret_corpus.py (config, comments, docs, ids, hashes). Target:
   <= 1% refused.
3. Cost: the engine's build time in a fresh interpreter (import, rule load, first scan), and the scan's time
   per KB on the samples and on 1 KB / 64 KB texts.

    .venv/bin/python bench/bench_secret_coverage.py [--rules] [--misses] [--no-timing]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

import benchlib as bl

sys.path.insert(0, str(bl.REPO / "tests"))
from hivemem import secrets
from secret_corpus import benign, benign_config, gitleaks_samples

BUILD = "import time; t = time.perf_counter(); from hivemem import secrets; secrets.scan('x = 1'); " \
        "print(time.perf_counter() - t)"  # fmt: skip


def coverage(scan: Callable[[str], object], show_rules: bool, show_misses: bool) -> dict[str, float]:
    data = gitleaks_samples()
    excluded = data.get("excluded", {})
    tp_hit = tp_all = fp_hit = fp_all = fp_excl_hit = fp_excl = 0
    rules_tp = rules_one = rules_full = 0
    rows = []
    for rule, s in sorted(data["rules"].items()):
        hits = [scan(t) is not None for t in s["tp"]]
        tp_hit, tp_all = tp_hit + sum(hits), tp_all + len(hits)
        if hits:
            rules_tp += 1
            rules_one += any(hits)
            rules_full += all(hits)
        fps = [(scan(t) is not None, t in excluded.get(rule, {})) for t in s["fp"]]
        fp_hit += sum(h for h, ex in fps if not ex)
        fp_all += sum(not ex for _, ex in fps)
        fp_excl_hit += sum(h for h, ex in fps if ex)
        fp_excl += sum(ex for _, ex in fps)
        if show_misses:
            for t, h in zip(s["tp"], hits, strict=True):
                if not h:
                    print(f"  miss  {rule}: {t[:90]!r}", file=sys.stderr)
            for t, (h, ex) in zip(s["fp"], fps, strict=True):
                if h and not ex:
                    print(f"  FP    {rule} ({scan(t)}): {t[:90]!r}", file=sys.stderr)
        rows.append((rule, f"{sum(hits)}/{len(hits)}", f"{sum(h for h, _ in fps)}/{len(fps)}"))
    if show_rules:
        bl.table(("rule", "tp refused", "fp refused"), rows)
    return {
        "tp_recall": tp_hit / tp_all, "tp": tp_all, "rules_tp": rules_tp, "rules_one": rules_one,
        "rules_full": rules_full, "fp_refused": fp_hit / max(fp_all, 1), "fp": fp_all,
        "fp_excluded": fp_excl, "fp_excluded_refused": fp_excl_hit,
    }  # fmt: skip


def benign_rate(scan: Callable[[str], object]) -> tuple[int, int, list[str]]:
    lines = [t for _, t in benign()] + benign_config()
    refused = [t for t in lines if scan(t) is not None]
    return len(refused), len(lines), refused


def tenfold() -> secrets.Engine:
    """An engine whose gitleaks rule set is 10x as large: nine copies of every rule, each under keywords of its
    own that ordinary text does not hold (the keyword pass must keep their regexes from running)."""
    from hivemem import gitleaks

    rules = gitleaks.Rules()
    copies = [gitleaks.Rule({**r.raw, "id": f"{r.id}-copy{n}", "keywords": [f"{k}{n}zq" for k in r.keywords]},
                            r.allowlists) for n in range(9) for r in rules.rules]  # fmt: skip
    rules.rules = rules.rules + tuple(copies)
    rules.index()
    return _rebuilt(rules)


def _rebuilt(rules: object) -> secrets.Engine:
    """A fresh engine around a given gitleaks rule set (its literal search rebuilt with the copies' keywords)."""
    from hivemem import gitleaks

    original = gitleaks.Rules
    gitleaks.Rules = lambda: rules  # type: ignore[assignment,misc,return-value]
    try:
        return secrets.Engine()
    finally:
        gitleaks.Rules = original  # type: ignore[misc]


def cpu_p50(engine: secrets.Engine, texts: list[str]) -> float:
    """Median CPU milliseconds of one scan (process time: the machine's load does not stretch it)."""
    times = []
    for text in texts:
        t = time.process_time()
        engine.scan(text)
        times.append(time.process_time() - t)
    return bl.ms(bl.median(times))


def timing() -> list[tuple[object, ...]]:
    builds = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", BUILD], check=True, capture_output=True, text=True).stdout
        builds.append(float(out))
    data = gitleaks_samples()
    texts = [t for s in data["rules"].values() for t in (*s["tp"], *s["fp"])]
    secrets.warm()
    for text in texts:  # first pass: the regexes these texts need are compiled
        secrets.scan(text)
    t = time.process_time()
    for text in texts:
        secrets.scan(text)
    elapsed = time.process_time() - t
    kb = sum(len(x.encode()) for x in texts) / 1024
    rows: list[tuple[object, ...]] = [
        ("engine build (fresh process), median of 3", f"{bl.ms(bl.median(builds)):.0f} ms")
    ]
    rows.append(
        ("scan CPU of the samples, per KB", f"{bl.ms(elapsed) / kb:.3f} ms ({len(texts)} samples, {kb:.0f} KB)")
    )
    gen = bl.TextGen(seed=9)
    for size in (1024, 65536):
        samples = [gen.text(size) for _ in range(20)]
        cpu_p50(secrets._engine(), samples)
        rows.append(
            (f"scan CPU p50, {size // 1024} KB of prose in one line", f"{cpu_p50(secrets._engine(), samples):.3f} ms")
        )
    # bench_secrets.py's texts (prose in lines, and source code), CPU time, today's rule set against one 10x larger
    import bench_secrets

    code, normal, big = bench_secrets.source_text(), secrets._engine(), tenfold()
    assert len(big.gitleaks.rules) == 10 * len(normal.gitleaks.rules)
    for size in (1024, 65536):
        texts = [bench_secrets.sized(bl.TextGen(seed=5), code, size, i) for i in range(40)]
        for engine in (normal, big, normal, big):  # alternating, each twice
            cpu_p50(engine, texts)  # warm: every regex a text needs compiled
        a, b = cpu_p50(normal, texts), cpu_p50(big, texts)
        rows.append((f"scan CPU p50 at {size // 1024} KB, rules x1 / x10", f"{a:.3f} / {b:.3f} ms ({b / a:.2f}x)"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", action="store_true", help="a row per gitleaks rule")
    ap.add_argument("--misses", action="store_true", help="list missed true and refused false positives")
    ap.add_argument("--no-timing", action="store_true", help="coverage only (as CI prints it)")
    args = ap.parse_args()
    bl.print_machine("secret scan coverage on gitleaks' samples")
    c = coverage(secrets.find, args.rules, args.misses)
    n, total, refused = benign_rate(secrets.find)
    if args.misses:
        for t in refused:
            print(f"  benign refused: {t!r}", file=sys.stderr)
    rows = [
        ("true positives refused", f"{c['tp_recall']:.3f} of {c['tp']}", ">= 0.95", bl.verdict(c["tp_recall"] >= 0.95)),
        ("rules catching at least one", f"{c['rules_one']} of {c['rules_tp']}", "all",
         bl.verdict(c["rules_one"] == c["rules_tp"])),
        ("rules catching all", f"{c['rules_full']} of {c['rules_tp']}", "-", "-"),
        ("false positives refused", f"{c['fp_refused']:.3f} of {c['fp']}", "<= 0.05",
         bl.verdict(c["fp_refused"] <= 0.05)),
        ("  excluded (listed), refused", f"{c['fp_excluded_refused']} of {c['fp_excluded']}", "-", "-"),
        ("benign lines refused", f"{n / total:.3f} ({n} of {total})", "<= 0.01", bl.verdict(n / total <= 0.01)),
    ]  # fmt: skip
    bl.table(("measure", "value", "target", "verdict"), rows)
    if not args.no_timing:
        bl.table(("cost", "value"), timing())


if __name__ == "__main__":
    main()
