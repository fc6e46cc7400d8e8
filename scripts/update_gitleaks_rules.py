"""Refresh hivemem's copy of gitleaks' rules and the test corpus of gitleaks' own samples (docs/security.md).

Reads a gitleaks checkout (a work tree or a bare clone; files are read with `git show REV:PATH`) and writes:

- `src/hivemem/gitleaks_rules.json`: every rule of `config/gitleaks.toml` (id, regex, keywords, entropy, secret
  group, allowlists) and the global allowlist, each regex translated from Go RE2 to Python `re` (the original is
  kept beside a changed one), with gitleaks' MIT notice and the commit it came from.
- `tests/fixtures/gitleaks_samples.json.gz`: per rule, the literal true- and false-positive samples of its
  function in `cmd/generate/config/rules/*.go` (samples gitleaks generates at random are left out), with the same
  notice. Compressed, so that the repository itself holds no secret-shaped text (tests/test_secrets.py, K8).

    python scripts/update_gitleaks_rules.py PATH-TO-GITLEAKS [--rev REV]

Nothing here runs at install or test time; the tests read only what it wrote.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RULES_OUT = REPO / "src" / "hivemem" / "gitleaks_rules.json"
SAMPLES_OUT = REPO / "tests" / "fixtures" / "gitleaks_samples.json.gz"
RULES_DIR = "cmd/generate/config/rules"

# POSIX classes (RE2 accepts them inside brackets; Python `re` does not)
POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "xdigit": "0-9a-fA-F", "upper": "A-Z",
         "lower": "a-z", "space": r"\t\n\v\f\r ", "word": "0-9A-Za-z_", "punct": r"!-/:-@\[-`{-~",
         "blank": r"\t "}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


# ---- RE2 -> Python re -------------------------------------------------------------------------------------------


def translate(pattern: str) -> str:
    """A Go RE2 pattern as a Python `re` pattern (compiled with re.ASCII, as RE2's classes are ASCII).

    - `\\z` (end of text) is Python's `\\Z`;
    - POSIX classes `[[:alnum:]]` are spelled out, and a `[` inside a class is escaped;
    - an inline flag group `(?i)` anywhere but at the start applies, in RE2, to the rest of its group: it becomes a
      scoped group `(?i:...)` around each remaining alternative of that group.
    """
    out = _classes(pattern)
    while True:
        found = _mid_flags(out)
        if found is None:
            return out
        start, end, flags = found
        close = _group_end(out, end)
        rest = out[end:close]
        scoped = "|".join(f"(?{flags}:{alt})" for alt in _alternatives(rest))
        out = out[:start] + scoped + out[close:]


def _classes(pattern: str) -> str:
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            esc = pattern[i : i + 2]
            out.append("\\Z" if esc == "\\z" and not in_class else esc)
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):
                end = pattern.index(":]", i)
                out.append(POSIX[pattern[i + 2 : end]])
                i = end + 2
                continue
            if c == "[":
                out.append("\\[")
            elif c == "]":
                in_class = False
                out.append(c)
            else:
                out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a leading `]` is literal
                out.append("\\]")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


_FLAGS = re.compile(r"\(\?([imsU-]+)\)")


def _mid_flags(pattern: str) -> tuple[int, int, str] | None:
    """(start, end, flags) of the first inline flag group not at offset 0, outside classes and escapes."""
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(" and i > 0:
            m = _FLAGS.match(pattern, i)
            if m:
                return m.start(), m.end(), m.group(1)
        i += 1
    return None


def _group_end(pattern: str, start: int) -> int:
    """The offset of the `)` closing the group that `start` is in (or the end of the pattern)."""
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return len(pattern)


def _alternatives(pattern: str) -> list[str]:
    """`pattern` split at its top-level `|`."""
    parts, depth, i, in_class, last = [], 0, 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[last:i])
            last = i + 1
        i += 1
    return [*parts, pattern[last:]]


def regex(pattern: str) -> dict[str, str]:
    """The translated pattern, and the original when they differ."""
    py = translate(pattern)
    return {"regex": py} if py == pattern else {"regex": py, "re2": pattern}


def allowlist(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if raw.get("condition"):
        out["condition"] = raw["condition"].upper()
    if raw.get("regexTarget"):
        out["target"] = raw["regexTarget"]
    if raw.get("regexes"):
        out["regexes"] = [regex(p) for p in raw["regexes"]]
    if raw.get("stopwords"):
        out["stopwords"] = [w.lower() for w in raw["stopwords"]]
    if raw.get("paths") or raw.get("commits"):
        out["paths"] = True  # a memory has no path or commit: such a check never holds
    return out


def rules(config: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for raw in config["rules"]:
        rule: dict[str, Any] = {"id": raw["id"]}
        if "regex" in raw:
            rule.update(regex(raw["regex"]))
        if raw.get("path"):
            rule["path"] = raw["path"]
        rule["keywords"] = [k.lower() for k in raw.get("keywords", [])]
        if raw.get("entropy"):
            rule["entropy"] = raw["entropy"]
        if raw.get("secretGroup"):
            rule["secret_group"] = raw["secretGroup"]
        lists = [allowlist(a) for a in raw.get("allowlists", [])]
        if lists:
            rule["allowlists"] = lists
        out.append(rule)
    return out


# ---- the samples in the Go sources ------------------------------------------------------------------------------

TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<raw>`[^`]*`)|(?P<str>"(?:[^"\\\n]|\\.)*")"""
    r"""|(?P<rune>'(?:[^'\\\n]|\\.)+')|(?P<ident>[A-Za-z_]\w*)|(?P<op>\.\.\.|:=|[-+*/%&|^<>=!]=?|[(){}\[\],;.:])"""
    r"""|(?P<num>\d[\w.]*)""",
    re.S,
)
ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"', "'": "'"}


def tokens(src: str) -> list[tuple[str, str]]:
    out = []
    for m in TOKEN.finditer(src):
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment"):
            out.append((kind, m.group()))
    return out


def unquote(kind: str, text: str) -> str:
    if kind == "raw":
        return text[1:-1].replace("\r", "")
    body, out, i = text[1:-1], [], 0
    raw = bytearray()
    while i < len(body):
        c = body[i]
        if c != "\\":
            raw += c.encode()
            i += 1
            continue
        e = body[i + 1]
        if e in ESCAPES:
            raw += ESCAPES[e].encode()
            i += 2
        elif e == "x":
            raw.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif e in "uU":
            n = 4 if e == "u" else 8
            raw += chr(int(body[i + 2 : i + 2 + n], 16)).encode()
            i += 2 + n
        else:  # octal
            raw.append(int(body[i + 1 : i + 4], 8))
            i += 4
    out.append(raw.decode("utf-8", "replace"))
    return "".join(out)


class Parser:
    """Just enough of Go's expressions to evaluate string literals, their sums, `[]string{...}` and `append`."""

    def __init__(self, toks: list[tuple[str, str]], env: dict[str, Any]) -> None:
        self.toks, self.i, self.env = toks, 0, env

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self) -> Any:
        value = self.unary()
        while self.peek() == ("op", "+"):
            self.take()
            right = self.unary()
            value = value + right if isinstance(value, str) and isinstance(right, str) else None
        while self.peek()[0] == "op" and self.peek()[1] in ("-", "*", "/", "==", "!=", "<", ">", "&&", "||"):
            self.take()
            self.unary()
            value = None
        return value

    def unary(self) -> Any:
        kind, text = self.take()
        if kind in ("raw", "str"):
            return unquote(kind, text)
        if (kind, text) == ("op", "["):
            while self.peek() != ("op", "{") and self.peek()[0] != "eof":
                self.take()
            items = self.items("}")
            return items if text == "[" else None
        if (kind, text) == ("op", "("):
            value = self.expr()
            self.skip_to(")")
            return value
        if kind == "ident":
            return self.named(text)
        return None

    def named(self, name: str) -> Any:
        """An identifier: a variable, a call (`append` evaluated, any other unknown) or a composite literal."""
        while self.peek() == ("op", "."):
            self.take()
            name += "." + self.take()[1]
        if self.peek() == ("op", "("):
            self.take()
            args = self.args()
            if name == "append" and args:  # onto a list of generated samples: the literal ones added
                out = list(args[0][0]) if isinstance(args[0][0], list) else []
                for value, spread in args[1:]:
                    if spread and isinstance(value, list):
                        out.extend(value)
                    elif not spread:
                        out.append(value)
                return out
            return None
        if self.peek() == ("op", "{"):  # a composite literal of another type
            self.take()
            self.skip_to("}")
            return None
        return self.env.get(name)

    def args(self) -> list[tuple[Any, bool]]:
        out = []
        while self.peek() != ("op", ")") and self.peek()[0] != "eof":
            value = self.expr()
            spread = self.peek() == ("op", "...")
            if spread:
                self.take()
            out.append((value, spread))
            if self.peek() == ("op", ","):
                self.take()
            elif self.peek() != ("op", ")"):
                self.skip_to(")")
                return out
        self.take()
        return out

    def items(self, close: str) -> list[Any]:
        self.take()  # the `{`
        out = []
        while self.peek() != ("op", close) and self.peek()[0] != "eof":
            value = self.expr()
            out.append(value)
            if self.peek() == ("op", ","):
                self.take()
            elif self.peek() != ("op", close):
                self.skip_to(close)
                return out
        self.take()
        return out

    def skip_to(self, close: str) -> None:
        depth = 0
        while self.peek()[0] != "eof":
            kind, text = self.take()
            if kind == "op" and text in "({[":
                depth += 1
            elif kind == "op" and text in ")}]":
                if depth == 0:
                    return
                depth -= 1


def samples(sources: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """Per rule id, its function's literal `tps` and `fps` strings (in order, each once)."""
    out: dict[str, dict[str, list[str]]] = {}
    for src in sources.values():
        for body in functions(src):
            rule_id = re.search(r'RuleID:\s*"([^"]+)"', body)
            if rule_id is None:
                continue
            env = evaluate(tokens(body))
            found = out.setdefault(rule_id.group(1), {"tp": [], "fp": []})
            for key, name in (("tp", "tps"), ("fp", "fps")):
                for value in env.get(name) or []:
                    if isinstance(value, str) and value not in found[key]:
                        found[key].append(value)
    return {k: v for k, v in sorted(out.items()) if v["tp"] or v["fp"]}


def functions(src: str) -> list[str]:
    """The bodies of the top-level functions of a Go file."""
    out = []
    for m in re.finditer(r"^func [^\n]*\{\n", src, re.M):
        end = re.compile(r"^\}", re.M).search(src, m.end())
        out.append(src[m.end() : end.start() if end else len(src)])
    return out


def evaluate(toks: list[tuple[str, str]]) -> dict[str, Any]:
    """The string and []string values the body's `name := ...` / `name = ...` statements give, in order."""
    env: dict[str, Any] = {}
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ("eof", "")
        prev = toks[i - 1] if i else ("op", ";")
        if kind == "ident" and nxt[1] in (":=", "=") and prev[1] not in (".", ","):
            p = Parser(toks, env)
            p.i = i + 2
            if p.peek() == ("ident", "range"):
                i += 2
                continue
            value = p.expr()
            if value is not None:
                env[text] = [v for v in value if isinstance(v, str)] if isinstance(value, list) else value
            i = max(p.i, i + 2)
            continue
        i += 1
    return env


# ---- exclusions ---------------------------------------------------------------------------------------------

# False-positive samples of a rule that are another format's real shape, found by a check outside gitleaks' rules.
SHAPES = {"mailchimp-api-key": (re.compile(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"), "a Mailchimp key's shape")}


def exclusions(found: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, str]]:
    """Per rule, its false-positive samples that are not false positives of the scan as a whole, with the reason:
    another gitleaks rule reports the sample (run on the rules just written), or it has another format's shape."""
    sys.path.insert(0, str(REPO / "src"))
    from hivemem import gitleaks  # the package as written above, not an installed copy

    rules = gitleaks.Rules()
    out: dict[str, dict[str, str]] = {}
    for rule_id, s in found.items():
        for text in s["fp"]:
            others = [r for r in rules.report(text) if r != rule_id]
            shape = SHAPES.get(rule_id)
            if others:
                out.setdefault(rule_id, {})[text] = f"a real secret of another rule: gitleaks' {others[0]} reports it"
            elif shape is not None and shape[0].search(text):
                out.setdefault(rule_id, {})[text] = shape[1]
    return out


# ---- main -------------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gitleaks", type=Path, help="a gitleaks checkout or bare clone")
    ap.add_argument("--rev", default="HEAD")
    args = ap.parse_args()
    commit = git(args.gitleaks, "rev-parse", f"{args.rev}^{{commit}}").strip()
    date = git(args.gitleaks, "show", "-s", "--format=%cs", commit).strip()
    notice = git(args.gitleaks, "show", f"{commit}:LICENSE")
    config = tomllib.loads(git(args.gitleaks, "show", f"{commit}:config/gitleaks.toml"))
    source = {"project": "gitleaks", "url": "https://github.com/gitleaks/gitleaks", "commit": commit, "date": date,
              "files": "config/gitleaks.toml"}  # fmt: skip
    glob = config.get("allowlist", {})
    data = {
        "about": "gitleaks' default rules, translated to Python re by scripts/update_gitleaks_rules.py; do not edit",
        "source": source,
        "license": notice,
        "allowlist": allowlist(glob),
        "rules": rules(config),
    }
    RULES_OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", "utf-8")
    names = [
        n for n in git(args.gitleaks, "ls-tree", "--name-only", commit, f"{RULES_DIR}/").split() if n.endswith(".go")
    ]
    sources = {n: git(args.gitleaks, "show", f"{commit}:{n}") for n in names}
    found = samples(sources)
    ids = {r["id"] for r in data["rules"]}
    absent = sorted(k for k in found if k not in ids)  # functions of rules the default configuration leaves out
    found = {k: v for k, v in found.items() if k in ids}
    corpus = {"source": {**source, "files": f"{RULES_DIR}/*.go"}, "license": notice, "rules": found,
              "not_in_config": absent, "excluded": exclusions(found)}  # fmt: skip
    SAMPLES_OUT.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(corpus, indent=1, ensure_ascii=False, sort_keys=True).encode()
    SAMPLES_OUT.write_bytes(gzip.compress(raw, mtime=0))
    tps, fps = sum(len(v["tp"]) for v in found.values()), sum(len(v["fp"]) for v in found.values())
    print(f"{len(data['rules'])} rules, {len(found)} with samples: {tps} true and {fps} false positives "
          f"(gitleaks {commit[:12]}, {date})", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
