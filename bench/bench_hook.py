"""Hook latency: `hivemem hook prompt-submit --harness claude-code` start to finish vs starting Python.

A store of --size memories (default 10,000; 80-400 bytes) is prefilled with the daemon stopped over 20 spaces,
two of which form the hook's read path (`project/acme-api`, `user`); the daemon is then started and kept warm
(one connection held open) and a few memories matching the prompt are added with kinds (4 on the read path, 1
off it, which must not be recalled). The prompt also carries two mid-frequency words of the synthetic vocabulary,
so the full-text list has hundreds of candidates to rank, as a real prompt against a real store would.

Each timed run is a fresh process, as Claude Code runs it: the `hivemem` entry point of this venv with the hook
JSON {"session_id","cwd","prompt","hook_event_name":"UserPromptSubmit"} on stdin, cwd = the project directory
(a temporary `acme-api/` holding a `.git` marker), the home's environment and no HIVEMEM_TOKEN (the hook runs
as `unknown`, as `hivemem setup claude-code` configures it). Every timed hook run must print a payload.

Baselines, same run, interleaved:
    same interpreter   sys.executable -c "import json, socket"   (the venv's python: the hook's interpreter; judged)
    python3 on PATH    python3 -c "import json, socket"           (whatever PATH gives, e.g. a pyenv shim; info)
Also (info): `hivemem hook prompt-submit --help`, which imports the CLI and the hook module but does no I/O.

Target: hook median <= 3 x same-interpreter baseline median.

With --plugin (info, docs/plugins.md): also the hook as the harness plugins run it. A client `claude-code` is
saved with `hivemem client add --save` (which records this hivemem's path beside the config), then:
    direct --client    `hivemem hook prompt-submit --harness claude-code --client claude-code`
    plugin line        `sh -c '<the command of plugins/hivemem/hooks/hooks.json>'`: finds the recorded hivemem,
                       runs `hivemem --requires VERSION hook prompt-submit --harness claude-code --client claude-code`
and prints plugin median / direct median.

    .venv/bin/python bench/bench_hook.py [--size 10000] [--runs 30] [--keep] [--plugin]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import benchlib as bl

TARGET = 3.0
SPACES = ["project/acme-api", "user"] + [f"project/p{i:02d}" for i in range(12)] + [f"team/t{i}" for i in range(6)]
PLANTED = [
    ("project/acme-api", "convention", "Deploys of acme-api go through `make release`; never push to the staging "
     "cluster by hand."),
    ("project/acme-api", "decision", "The staging cluster for acme-api moved to eu-west-2 in October; deploy with "
     "the blue-green script."),
    ("project/acme-api", "lesson", "A deploy to staging failed when the cluster quota ran out: check the quota "
     "before large deploys."),
    ("user", "preference", "Prefers small PRs and asks before any deploy to a shared cluster."),
    ("project/p03", "procedure", "Billing deploys use the staging cluster too, but through Terraform."),
]  # fmt: skip
MUST_SHOW, MUST_NOT_SHOW = "make release", "Terraform"


def items(gen: bl.TextGen, n: int) -> Iterator[tuple[str, str]]:
    for i in range(n):
        yield SPACES[i % len(SPACES)], gen.text(gen.rng.randint(80, 400))


Proc = subprocess.CompletedProcess[bytes]


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], env: dict[str, str], cwd: str, stdin: bytes) -> tuple[float, float, Proc]:
    """Wall time and CPU time (user + sys of the child) of one process, and its result."""
    c, t = cpu_children(), time.perf_counter()
    proc = subprocess.run(argv, input=stdin, env=env, cwd=cwd, capture_output=True, check=False)
    return time.perf_counter() - t, cpu_children() - c, proc


def check_payload(proc: Proc) -> str:
    """'' when the hook printed the expected payload, else what is wrong."""
    if proc.returncode != 0:
        return f"exit {proc.returncode}"
    if not proc.stdout.strip():
        return "no output"
    try:
        out = json.loads(proc.stdout)["hookSpecificOutput"]
    except (ValueError, KeyError, TypeError):
        return "not the hook JSON"
    text = out.get("additionalContext", "")
    if out.get("hookEventName") != "UserPromptSubmit" or MUST_SHOW not in text or MUST_NOT_SHOW in text:
        return "payload lacks the planted memories (or shows the off-path one)"
    return ""


def setup(home: bl.Home, size: int) -> tuple[Any, str, str]:
    """Prefill, start the daemon, plant the matching memories; returns (open client, project dir, prompt)."""
    gen = bl.TextGen(seed=size + 9)
    t = time.perf_counter()
    added = bl.prefill(home, items(gen, size))
    print(f"  prefilled {added:,} memories in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    client = home.client()
    for space, kind, content in PLANTED:
        client.call("memory.add", space=space, kind=kind, content=content)
    project = os.path.join(tempfile.mkdtemp(prefix="hivemem-bench-hook-"), "acme-api")
    os.makedirs(os.path.join(project, ".git"))
    prompt = (f"How do I deploy acme-api to the staging cluster? Last time the {gen.words[40]} {gen.words[120]} "
              "step broke halfway and I had to roll back by hand.")  # fmt: skip
    return client, project, prompt


HOOKS = ("hook", "client", "plugin")  # the commands that run the hook and must print the payload


def plugin_commands(home: bl.Home, hook: list[str]) -> dict[str, list[str]]:
    """The hook with a saved client token, directly and through the plugin's shell line (docs/plugins.md)."""
    from hivemem.cli import plugin

    grants = '[{"right":"read","scope":"*"}]'
    subprocess.run([bl.hivemem_exe(), "client", "add", "--name", "claude-code", "--grants", grants, "--save",
                    "--json"], env=home.cli_env, capture_output=True, check=True)  # fmt: skip
    hooks = json.loads(plugin.files()["plugins/hivemem/hooks/hooks.json"])
    line = hooks["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    return {"client": [*hook, "--client", "claude-code"], "plugin": ["sh", "-c", line]}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    home = bl.Home(f"hook-{args.size}")
    project = ""
    try:
        client, project, prompt = setup(home, args.size)
        stdin = json.dumps({"session_id": "bench-session", "cwd": project, "prompt": prompt,
                            "hook_event_name": "UserPromptSubmit"}).encode()  # fmt: skip
        hook = [bl.hivemem_exe(), "hook", "prompt-submit", "--harness", "claude-code"]
        cmds = {"same": [sys.executable, "-c", "import json, socket"], "hook": hook, "help": [*hook[:3], "--help"]}
        shim = shutil.which("python3")
        if shim:
            cmds["path"] = [shim, "-c", "import json, socket"]
        if args.plugin:
            cmds.update(plugin_commands(home, hook))
        for _ in range(3):  # page cache, pyc files and the daemon's caches warm for every command
            for argv in cmds.values():
                run(argv, home.env, project, stdin)
        times: dict[str, list[float]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        problems: list[str] = []
        order = list(cmds)
        for i in range(args.runs):
            for name in order[i % len(order) :] + order[: i % len(order)]:
                dt, dc, proc = run(cmds[name], home.env, project, stdin)
                times[name].append(dt)
                cpu[name].append(dc)
                if name in HOOKS:
                    problems.append(check_payload(proc))
                    payload = len(proc.stdout)
                elif proc.returncode != 0:
                    raise SystemExit(f"{cmds[name]} failed: {proc.stderr.decode()}")
        hooks_log = Path(home.paths.logs) / "hooks.log"
        logged = len(hooks_log.read_text().splitlines()) if hooks_log.exists() else 0
        client.close()
    finally:
        home.cleanup(args.keep)
        if project:
            shutil.rmtree(os.path.dirname(project), ignore_errors=True)
    return {"times": times, "cpu": cpu, "problems": problems, "payload": payload, "logged": logged, "shim": shim,
            "hook": hook}  # fmt: skip


def report(r: dict[str, Any]) -> bool:
    t = r["times"]
    same, hook = bl.median(t["same"]), bl.median(t["hook"])
    path = bl.median(t["path"]) if "path" in t else None
    bad = [p for p in r["problems"] if p]
    ok = hook <= TARGET * same and not bad
    labels = {
        "same": f"`{sys.executable} -c 'import json, socket'` (same interpreter; judged baseline)",
        "path": f"`python3 -c 'import json, socket'` via PATH ({r['shim']})",
        "help": "`hivemem hook prompt-submit --help` (imports only, info)",
        "hook": "`hivemem hook prompt-submit --harness claude-code` (warm daemon)",
        "client": "the same with `--client claude-code` (its saved token)",
        "plugin": "the plugin's hook line: `sh -c 'x=…recorded hivemem…; exec \"$x\" --requires … --client …'`",
    }
    c = r["cpu"]
    cpu_same = bl.median(c["same"])
    rows = [(label, bl.ms(bl.median(t[k])), bl.median(t[k]) / same, bl.ms(bl.pct(t[k], 90)), bl.ms(max(t[k])),
             bl.ms(bl.median(c[k])), bl.median(c[k]) / cpu_same) for k, label in labels.items() if k in t]  # fmt: skip
    print("Wall time per process in ms (spawn to exit, stdin written and stdout read). x same = median / median of")
    print("the same-interpreter baseline. CPU = user + sys of the process itself (getrusage of children; the")
    print("daemon's work for the hook is not in it): less sensitive to other load on the machine (info).\n")
    bl.table(("command", "median", "x same", "p90", "max", "CPU median", "CPU x same"), rows)
    print(f"hook / same-interpreter baseline = {hook / same:.2f}x (target <= {TARGET}x): {bl.verdict(ok)}")
    if path is not None:
        print(f"hook / python3-on-PATH baseline = {hook / path:.2f}x (info only: PATH's python3 is {r['shim']};"
              f" a shim or another interpreter is not the hook's start-up cost)")  # fmt: skip
    print(f"timed hook runs with the expected payload: {len(r['problems']) - len(bad)}/{len(r['problems'])}"
          f" (payload {r['payload']:,} bytes); hooks.log lines: {r['logged']}; max hook run "
          f"{bl.ms(max(t['hook'])):.0f} ms (the hook budget of docs/hooks.md, 1.5 s)")  # fmt: skip
    if "plugin" in t:
        direct = bl.median(t["client"])
        print(f"plugin line / direct `--client` run = {bl.median(t['plugin']) / direct:.2f}x (medians "
              f"{bl.ms(bl.median(t['plugin'])):.1f} ms and {bl.ms(direct):.1f} ms; info)")  # fmt: skip
    if bad:
        print(f"problems: {sorted(set(bad))}")
    print()
    return not ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store (default 10000)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each command (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home under bench/out/")
    parser.add_argument("--plugin", action="store_true", help="also time the hook as the harness plugins run it")
    args = parser.parse_args()
    bl.print_machine("bench_hook: `hivemem hook prompt-submit` vs starting Python")
    r = measure(args)
    print(f"{args.size:,} memories over {len(SPACES)} spaces (+{len(PLANTED)} planted); read path "
          f"[project/acme-api, user]; {args.runs} runs of each command, interleaved, 3 warm-up rounds.\n")  # fmt: skip
    return 1 if report(r) else 0


if __name__ == "__main__":
    sys.exit(main())
