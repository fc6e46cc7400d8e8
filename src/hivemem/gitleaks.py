"""gitleaks' rules, run the way gitleaks runs them (docs/security.md, docs/decisions.md D260).

The rules are gitleaks' default configuration as package data (`gitleaks_rules.json`, written by
scripts/update_gitleaks_rules.py from a gitleaks checkout, its regexes translated from Go RE2 to Python `re`;
gitleaks' MIT notice is in that file). A rule runs only when the text holds one of its keywords (the caller's
one-pass literal search finds them); then its regex, then its entropy floor, then the global allowlist and the
rule's own. A rule's regex runs on the lines holding one of its keywords, or on the whole text when the regex can
match across lines. Each regex and allowlist is compiled the first time a text needs it, and kept.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import NotRequired, TypedDict

RULES_FILE = "gitleaks_rules.json"
# Literals (lowercase) that every match of a rule holds besides its keyword, for rules whose keyword is an everyday
# word: the rule runs only on a text that holds them too (read off the regexes; tests/test_secrets.py checks each
# occurs in every alternative of the rule's regex).
REQUIRES = {"kubernetes-secret-yaml": ("kind:", "data:")}
# Rules left out, and why. gitleaks runs a rule with a `path` only on files of that name; a memory has none, so
# hivemem runs such a rule when its regex identifies the format by itself (a Kubernetes Secret's `kind: Secret`,
# NuGet's `<add key="Password"`, a PHP array's `'secret_key' =>`), and leaves out the one that does not.
LEFT_OUT = {"hashicorp-tf-password": "any quoted value after `password`: a secret in Terraform files only"}
# Rules whose every match starts where one of their keywords does (`\b` then the keyword: `ey` of a JWT, `s.` of a
# Vault token). Their keywords are everywhere in ordinary text, so they are matched at each keyword rather than
# searched for (tests/test_secrets_gitleaks.py checks each regex opens so, and the verdicts against a search).
STARTS_AT_KEYWORD = ("jwt", "vault-service-token")
SEMI_GENERIC = r"[\w.-]{0,50}?"  # how gitleaks' generated name-then-value rules begin
FLAGS = re.ASCII  # RE2's \w, \d, \s and \b are ASCII
# A regex meant to match across line breaks runs on the whole text: it spells a line break (`[\r\n]`, not the
# escaped `\\n` of the usual terminator), lets `.` match one (`(?s)`), or takes any character (`[\s\S]`). The others
# run line by line: a `[\s'"]{0,3}` between a name and its `=` could span a line break, but in gitleaks' samples
# never does, and running the name-then-value rules on 64 KB at once costs 10x the per-line runs.
CROSSES_LINES = re.compile(r"(?<!\\)\\[nr]|\(\?[a-z]*s|\\s\\S|\\S\\s")


class RawRegex(TypedDict):
    regex: str
    re2: NotRequired[str]  # gitleaks' RE2 spelling, where Python's differs


class RawAllowlist(TypedDict, total=False):
    """An allowlist of gitleaks_rules.json, as written."""

    regexes: list[RawRegex]
    stopwords: list[str]
    target: str  # "match" or "line"; the secret when absent
    paths: bool  # it names paths, which a memory does not have
    condition: str  # "AND": every kind it names must match; else any


class RawRule(TypedDict):
    """A rule of gitleaks_rules.json, as written."""

    id: str
    regex: str
    re2: NotRequired[str]
    keywords: NotRequired[list[str]]
    entropy: NotRequired[float]
    secret_group: NotRequired[int]
    path: NotRequired[str]
    allowlists: NotRequired[list[RawAllowlist]]


def shannon(value: str) -> float:
    """Bits per character over the characters the value holds (gitleaks' `shannonEntropy`)."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


@dataclass
class Allowlist:
    """One allowlist: a finding it matches is not reported."""

    raw: RawAllowlist

    @cached_property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(r["regex"], FLAGS) for r in self.raw.get("regexes", ()))

    @property
    def stopwords(self) -> tuple[str, ...]:
        return tuple(self.raw.get("stopwords", ()))

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.raw.get("target", ""), secret)
        by_regex = any(r.search(target) for r in self.regexes)
        lowered = secret.lower()
        by_word = any(w in lowered for w in self.stopwords)
        if self.raw.get("condition") == "AND":
            checks = []
            if self.raw.get("paths"):
                checks.append(False)  # a memory has no path or commit
            if self.raw.get("regexes"):
                checks.append(by_regex)
            if self.raw.get("stopwords"):
                checks.append(by_word)
            return bool(checks) and all(checks)
        return by_regex or by_word


@dataclass
class Rule:
    """One gitleaks rule."""

    raw: RawRule
    allowlists: tuple[Allowlist, ...] = field(default=())

    @property
    def id(self) -> str:
        return str(self.raw["id"])

    @property
    def keywords(self) -> tuple[str, ...]:
        return tuple(self.raw.get("keywords", ()))

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.raw["regex"], FLAGS)

    @cached_property
    def by_lines(self) -> re.Pattern[str]:
        """The regex run on a whole text of many lines at once: `^` and `$` at each line's ends, as line by line."""
        return re.compile(self.raw["regex"], FLAGS | re.M)

    @property
    def requires(self) -> tuple[str, ...]:
        return REQUIRES.get(self.id, ())

    @cached_property
    def whole_text(self) -> bool:
        """Whether the regex runs on the whole text (it can match across lines) rather than line by line."""
        return CROSSES_LINES.search(self.raw["regex"]) is not None

    @cached_property
    def anchored(self) -> re.Pattern[str] | None:
        """For a rule of gitleaks' semi-generic form (`[\\w.-]{0,50}?` then the names, then `=` and a value): the
        regex without that lazy prefix, to be matched where a keyword starts (each name begins with one; a test
        holds the two to the same verdicts on gitleaks' samples). A search for it costs a scan of every offset
        of the line; a match at the few keyword offsets, a fraction of that."""
        regex = self.raw["regex"]
        head = regex.find("(?:")
        if head < 0 or SEMI_GENERIC not in regex[:head]:
            return None
        return re.compile(regex[:head].replace(SEMI_GENERIC, "") + regex[head:], FLAGS)

    def secret(self, match: re.Match[str]) -> str:
        """The secret of a match: the rule's secret group, else the first group that matched, else all of it."""
        group = int(self.raw.get("secret_group", 0))
        if group:
            return match.group(group) or ""
        return next((g for g in match.groups() if g), match.group(0).strip("\n"))

    def passes(self, m: re.Match[str], start: int, line: str, glob: Allowlist) -> bool:
        """Whether a match (gitleaks' match starting at `start`) passes the entropy floor and the allowlists."""
        secret = self.secret(m)
        entropy = float(self.raw.get("entropy", 0.0))
        if entropy and shannon(secret) <= entropy:
            return False
        match = m.string[start : m.end()].strip("\n")
        return not (glob.allows(secret, match, line) or any(a.allows(secret, match, line) for a in self.allowlists))

    def first(self, text: str, line_of: Callable[[int], str], glob: Allowlist, lines: bool = False) -> int | None:
        """The offset of the first match in `text` that passes, or None (`lines`: with `^`/`$` at line ends)."""
        for m in (self.by_lines if lines else self.pattern).finditer(text):
            if self.passes(m, m.start(), line_of(m.start()), glob):
                return m.start()
        return None

    def at_keywords(self, text: str, lowered: str, present: Set[str], glob: Allowlist,
                    line_of: Callable[[int], str]) -> int | None:  # fmt: skip
        """For a rule of STARTS_AT_KEYWORD: the first offset where its regex, matched at a keyword, passes."""
        for i in sorted({i for k in self.keywords if k in present for i in _offsets(lowered, k)}):
            m = self.pattern.match(text, i)
            if m is not None and self.passes(m, i, line_of(i), glob):
                return i
        return None

    def in_line(self, line: str, lowered: str, present: Set[str], glob: Allowlist) -> bool:
        """Whether the rule finds a secret in one line (`lowered`: its lowered copy; `present`: the literals the
        text holds): matched at its keywords when anchored, else searched."""
        anchored = self.anchored
        if anchored is None:
            return self.first(line, lambda _: line, glob) is not None
        for i in sorted({i for k in self.keywords if k in present for i in _offsets(lowered, k)}):
            m = anchored.match(line, i)
            if m is not None:
                start = i  # gitleaks' match starts at the name's first character, up to 50 before
                while start > max(0, i - 50) and (line[start - 1].isalnum() or line[start - 1] in "_.-"):
                    start -= 1
                if self.passes(m, start, line, glob):
                    return True
        return False


def _offsets(text: str, word: str) -> Iterator[int]:
    at = text.find(word)
    while at != -1:
        yield at
        at = text.find(word, at + 1)


class Rules:
    """The rule set, loaded once (the file is JSON: about a millisecond); nothing is compiled until needed."""

    def __init__(self) -> None:
        data = json.loads(resources.files("hivemem").joinpath(RULES_FILE).read_text("utf-8"))
        self.source: dict[str, str] = data["source"]
        self.glob = Allowlist(data.get("allowlist", {}))
        self.rules = tuple(
            Rule(r, tuple(Allowlist(a) for a in r.get("allowlists", ())))
            for r in data["rules"]
            if "regex" in r and r["id"] not in LEFT_OUT
        )
        self.path_only = tuple(r["id"] for r in data["rules"] if "regex" not in r)  # a file name is the finding
        self.index()

    def index(self) -> None:
        """Index the rules by keyword (again after a change to `rules`, as bench/bench_secret_coverage.py makes)."""
        self.keywords = frozenset(k for r in self.rules for k in (*r.keywords, *r.requires))
        self.by_keyword: dict[str, list[int]] = {}  # keyword -> the rules (by index) it lets run
        for i, r in enumerate(self.rules):
            for k in r.keywords:
                self.by_keyword.setdefault(k, []).append(i)
        if any(not r.keywords for r in self.rules):
            raise ValueError("a gitleaks rule without keywords would run on every text")

    def candidates(self, present: frozenset[str] | set[str]) -> list[Rule]:
        """The rules a text holding these keywords can match (gitleaks' keyword pre-filter; `present` holds the
        required literals too)."""
        found = {i for k in present if k in self.by_keyword for i in self.by_keyword[k]}
        return [self.rules[i] for i in sorted(found) if all(w in present for w in self.rules[i].requires)]

    def report(self, text: str) -> list[str]:
        """The ids of the rules that find a secret in `text`, the plain way: every rule whose keyword the lowered
        text holds, its regex over the whole text. The reference that the scan's shortcuts (line by line, matched
        at keywords) are tested against, and what scripts/update_gitleaks_rules.py excludes samples by."""
        lowered = text.lower()
        starts = [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]

        def line_of(at: int) -> str:
            n = bisect_right(starts, at) - 1
            end = starts[n + 1] - 1 if n + 1 < len(starts) else len(text)
            return text[starts[n] : end]

        return [
            r.id
            for r in self.rules
            if (not r.keywords or any(k in lowered for k in r.keywords))
            and r.first(text, line_of, self.glob) is not None
        ]
