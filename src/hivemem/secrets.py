"""Secret detection for every string hivemem stores (docs/security.md).

The core is gitleaks' default rule set (hivemem.gitleaks, package data with gitleaks' MIT notice; docs/decisions.md
D260). Beside it runs what gitleaks lacks (D261): from Yelp's detect-secrets (pinned in pyproject.toml) a few
format plugins for bare shapes; its keyword plugin in config mode, so an unquoted `password=...` counts; and its
Base64 entropy plugin only on lines that name a secret, and only for values that mix letters of both cases and
digits. Hex entropy is off: commit SHAs, SHA-256 digests and UUIDs are everyday memory text. `secret_rules.toml`
adds hivemem's own rules (hivemem tokens, headers, URL and .netrc credentials, ...).

A scan is a pure function of the text. The plugins' string analysis and the library's filter
functions are called directly, never its scan entry points, so no global settings are read or
changed, no verification request is ever made, and any number of threads may scan at once.

Importing detect-secrets takes about 0.3 s, so the engine is built on first use (or by `warm()`),
never at import: the CLI's warm path imports this module's name and nothing behind it. gitleaks' regexes
compile when a text first needs them.
"""

from __future__ import annotations

import math
import re
import threading
import tomllib
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from itertools import accumulate
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import NotRequired, TypedDict

    from detect_secrets.plugins.base import BasePlugin
    from detect_secrets.plugins.keyword import KeywordDetector

    from hivemem import gitleaks

    class RawRule(TypedDict):
        """One `[[rules]]` table of secret_rules.toml, as written."""

        id: str
        regex: str
        keywords: list[str]
        entropy: NotRequired[float]
        min_classes: NotRequired[int]
        multiline: NotRequired[bool]


RULES_FILE = "secret_rules.toml"
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
COMMON = ("s.", "ey", "sk", "sl", "key", "api")  # frequent short literals, found by a substring search each
AUTOMATON_WORDS = 8  # fewer literals than this (besides COMMON ones) are found by a substring search each
MANY_LINES = 8  # a gitleaks rule whose keyword is on more lines runs on the whole text at once
CANDIDATE_SETS = 4096  # sets of literals whose plugins and rules are remembered
MIN_RANDOM = 16  # no shorter value has the entropy plugin's 4.5 bits per character
# Words that open a line to the entropy plugin (the gate keeps prose with hashes and ids out).
ENTROPY_GATE = ("secret", "token", "apikey", "api_key", "api-key", "passw", "pwd", "cookie", "session", "auth",
                "bearer", "credential")  # fmt: skip
# For plugins with no literal, a suffix of their pattern that starts with one (so it is searched quickly): any match
# of the whole pattern holds a match of its suffix.
SUFFIXES = {
    "DiscordBotTokenDetector": r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",
    "TelegramBotTokenDetector": r":[0-9A-Za-z_-]{35}",
}
# Literal triggers: each match of the plugin holds a literal of every group, so the plugin runs only on the
# lines holding them (read off the pinned version's patterns; a test checks each literal occurs in every pattern).
# Lowercase literals are looked for in the lowered text, the others as written. A substring search costs
# microseconds where a regex pass over 64 KB costs milliseconds (worst for case-insensitive alternations).
# The keyword plugin's config-mode patterns each need an operator in the line: `keyword...:`, `keyword... =`
# (or `!=`), `'value' == keyword` (two of `!=`), or a statement's closing `;`. By a fragment of each pattern's text,
# what one of its matches must hold (read off the pinned version's patterns; a test checks that each pattern has
# exactly one, and that skipping the others changes no value found).
KEYWORD_OPERATORS = (
    ("]{0,2})?:\\s*(", (":",)),
    ("(={1,3}|!==?)", ("=",)),
    ("[!=]{2,3}", ("==", "!=", "=!", "!!")),
    ("(\\2);", (";",)),
)
TRIGGERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "AzureStorageKeyDetector": (("accountkey=",),),
    "IbmCloudIamDetector": (("key", "pwd", "pass", "token"),),
    "MailchimpDetector": (("-us",),),
    "SoftlayerDetector": (("sl", "softlayer"),),
    "SquareOAuthDetector": (("sq0csp-",),),
    "TwilioKeyDetector": (("AC", "SK"),),
}
# Value shapes: a plugin whose pattern names a keyword and then captures a value of a fixed form runs only on the
# lines that hold such a value. Each alternative opens the plugin's capture group in one of its patterns (a test
# checks it), so any match of the pattern holds a match of its shape. The plugins match ignoring case, which makes
# a character class slow to search, so the shape is searched without that flag in the line's lowered copy, for
# lines of ASCII text only (there the two agree; other lines go to the plugin unfiltered). Their keywords
# (`key`, `pass`, `token`) are everyday words; the shape is not, and its search costs a fraction of the pattern's.
VALUE_SHAPES: dict[str, tuple[str, ...]] = {
    "IbmCloudIamDetector": (r"[a-zA-Z0-9_\-]{44}",),
    "SoftlayerDetector": ("[a-z0-9]{64}",),
}
# A placeholder, not a credential: a run of 8 of one character (`xxxxxxxx`, `XXXX...`, `########`, `11111111`) or
# AWS's documented `EXAMPLE` suffix (gitleaks' rules reach the same verdict through their entropy floors).
PLACEHOLDER = re.compile(r"(.)\1{7}|EXAMPLE")
DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # `secret = match.group`: an attribute, not a value
TYPE_NAME = re.compile(r"(?:str|string|String|bytes|int|bool|Optional|SecretStr)\b")  # `password: str` declares
DIGEST_PREFIX = re.compile(r"sha(?:1|224|256|384|512)-", re.I)  # subresource-integrity digests are not secrets
# A number with its unit or a comment (a minimum length in characters, a timeout in seconds) is a setting
QUANTITY = re.compile(r"\d+(?:\.\d+)?\s*(?:#.*|[A-Za-z]+(?:\s+[A-Za-z]+)*)")
SETTING_NAME = re.compile(r"[\s\"'-]*([A-Za-z_][\w.-]*)[\"']?\s*[:=]")  # the name a line assigns to
NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# The last word of a name that says the value is about a secret, not the secret (its backend, its name, its
# policy): with a value without digits, no credential.
ABOUT_WORDS = frozenset(("name", "names", "policy", "backend", "prefix", "suffix", "length", "timeout", "rounds",
                         "days", "ttl", "url", "uri", "path", "file", "dir", "type", "history", "age", "header",
                         "endpoint", "field", "format", "algorithm", "mode", "provider", "store", "manager", "ref",
                         "label", "env", "strength", "scope", "scopes", "kind", "method", "rotation"))  # fmt: skip
# Plugins left out: the entropy pair (handled below, Hex not at all), the keyword plugin (run in config
# mode below), public IPv4 addresses, which are not credentials, and the formats gitleaks' rules find with
# fewer false refusals (measured on gitleaks' samples, bench/bench_secret_coverage.py; docs/decisions.md D261).
COVERED = ("AWSKeyDetector", "ArtifactoryDetector", "BasicAuthDetector", "CloudantDetector",
           "GitHubTokenDetector", "GitLabTokenDetector", "IbmCosHmacDetector", "JwtTokenDetector", "NpmDetector",
           "OpenAIDetector", "PrivateKeyDetector", "PypiTokenDetector", "SendGridDetector", "SlackDetector",
           "StripeDetector")  # fmt: skip
SKIPPED = ("Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector", *COVERED)


@dataclass(frozen=True)
class Finding:
    """What was found and where (1-based line); never the value itself."""

    kind: str
    line: int


def find(text: str) -> str | None:
    """The kind of the first secret in `text`, or None. Never returns the secret itself."""
    found = scan(text)
    return found.kind if found else None


def scan(text: str) -> Finding | None:
    """The first secret in `text` (the lowest line), or None."""
    return _engine().scan(text)


def find_in(value: object, at: str = "") -> tuple[str, str] | None:
    """(JSON pointer, kind) of the first string in a JSON value that holds a secret, or None.

    For writes whose text arrives inside a document rather than as params, as `store.import` does: its
    refusal carries the pointer as `data.at` (docs/operations.md). Object keys are names, not scanned.
    """
    if isinstance(value, str):
        kind = find(value)
        return None if kind is None else (at, kind)
    members = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, member in members:
        hit = find_in(member, f"{at}/{str(key).replace('~', '~0').replace('/', '~1')}")
        if hit is not None:
            return hit
    return None


def ready() -> bool:
    """Whether the engine is built, so a scan costs no import."""
    return bool(_built)


def warm() -> None:
    """Build the engine now (the daemon does this at start, so no request pays for the import)."""
    _engine()


_lock = threading.Lock()
_built: list[Engine] = []


def _engine() -> Engine:
    if not _built:
        with _lock:
            if not _built:
                _built.append(Engine())
    return _built[0]


def shannon(value: str) -> float:
    """Bits per character over the characters the value holds (gitleaks' entropy)."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def classes(value: str) -> int:
    """How many of lowercase letters, uppercase letters and digits `value` holds."""
    return sum(any(test(c) for c in value) for test in (str.islower, str.isupper, str.isdigit))


def slug(secret_type: str) -> str:
    """A plugin's secret type as a kind: `AWS Access Key` -> `aws-access-key`."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


@dataclass(frozen=True)
class Rule:
    """One rule of secret_rules.toml."""

    kind: str
    pattern: re.Pattern[str]
    words: Words
    entropy: float = 0.0
    min_classes: int = 0
    multiline: bool = False

    @classmethod
    def load(cls, raw: RawRule) -> Rule:
        return cls(raw["id"], re.compile(raw["regex"]), Words(raw["keywords"]), float(raw.get("entropy", 0.0)),
                   int(raw.get("min_classes", 0)), bool(raw.get("multiline", False)))  # fmt: skip

    def first(self, lines: Lines, lowered: str) -> int | None:
        """The first line (from 0) holding a match whose value passes the checks, or None.

        A rule runs only on the lines that hold one of its keywords; a multiline rule on the whole text."""
        if self.multiline:
            if self.words.set.isdisjoint(lines.present):
                return None
            hit = next((m for m in self.pattern.finditer(lines.text) if self._passes(m)), None)
            return None if hit is None else bisect_right(lines.starts, hit.start()) - 1
        for n in sorted(self.words.lines(lines, lowered)):
            if any(self._passes(m) for m in self.pattern.finditer(lines[n])):
                return n
        return None

    def _passes(self, match: re.Match[str]) -> bool:
        value = next((g for g in match.groups() if g), match.group(0))
        return shannon(value) >= self.entropy and classes(value) >= self.min_classes and not PLACEHOLDER.search(value)


def load_rules() -> tuple[Rule, ...]:
    data = tomllib.loads(resources.files("hivemem").joinpath(RULES_FILE).read_text("utf-8"))
    return tuple(Rule.load(raw) for raw in data["rules"])


class Lines:
    """A text's lines (split at LF, a trailing CR dropped) and the line of any offset."""

    def __init__(self, text: str) -> None:
        self.text = text
        # where each line starts: 0, then one past each LF (summed line lengths, without a Python loop per line)
        self.starts = list(accumulate(map((1).__add__, map(len, text.split("\n"))), initial=0))[:-1]
        self.found: dict[tuple[str, bool], frozenset[int]] = {}
        self.present: set[str] = set()  # the literals the text holds (lowercase ones in its lowered copy)

    def __getitem__(self, n: int) -> str:
        return self.line(n, self.text)

    def line(self, n: int, text: str) -> str:
        """Line `n` of the text, or of a copy of it aligned with it (its lowered copy)."""
        end = self.starts[n + 1] - 1 if n + 1 < len(self.starts) else len(self.text)
        return text[self.starts[n] : end].removesuffix("\r")

    def spanned(self, pattern: re.Pattern[str], text: str) -> set[int]:
        """The lines that the matches of `pattern` in `text` (the text or an aligned copy) touch."""
        out: set[int] = set()
        for m in pattern.finditer(text):
            first = bisect_right(self.starts, m.start()) - 1
            out.update(range(first, bisect_right(self.starts, max(m.end() - 1, m.start()))))
        return out

    def holding(self, word: str, text: str) -> frozenset[int]:
        """The lines where `word` occurs in `text` (the text or its lowered copy), searched once per scan."""
        key = (word, text is self.text)
        found = self.found.get(key)
        if found is None:
            out: set[int] = set()
            starts = self.starts
            at = text.find(word)
            while at != -1:
                line = bisect_right(starts, at) - 1
                out.add(line)  # the rest of this line is settled: look again from the next line
                at = text.find(word, starts[line + 1]) if line + 1 < len(starts) else -1
            found = self.found[key] = frozenset(out)
        return found


class Words:
    """A set of literals, located with `str.find`: a C substring search per literal, where one regex alternation of
    them would try every branch at every offset."""

    def __init__(self, words: list[str] | tuple[str, ...]) -> None:
        self.words = tuple(words)
        self.set = frozenset(words)

    def lines(self, lines: Lines, text: str) -> set[int]:
        """The lines holding one of the words; `text` is the text itself or its lowered copy."""
        if self.set.isdisjoint(lines.present):
            return set()
        return set[int]().union(*(lines.holding(w, text) for w in self.words if w in lines.present))


class Plugin:
    """One detect-secrets plugin and a cheap search for the lines worth running it on."""

    def __init__(self, plugin: BasePlugin, patterns: Iterable[re.Pattern[str]],
                 triggers: tuple[tuple[str, ...], ...] | None) -> None:  # fmt: skip
        self.plugin = plugin
        self.kind = slug(plugin.secret_type)
        # Per trigger group: its lowercase literals (looked for in the lowered text) and the others (looked for
        # as written). Without triggers, the plugin's own patterns, line-anchored.
        self.groups = [(Words([w for w in g if w.islower()]), Words([w for w in g if not w.islower()]))
                       for g in triggers or ()]  # fmt: skip
        self.prechecks = () if triggers else tuple(re.compile(p.pattern, p.flags | re.M) for p in patterns)
        self.needs = [low.set | cased.set for low, cased in self.groups]  # one literal of each must be present
        shape = VALUE_SHAPES.get(type(plugin).__name__)
        self.shape = re.compile("|".join(shape)) if shape else None

    def lines(self, lines: Lines, lowered: str) -> set[int]:
        """Every line on which the plugin can match (a superset: a whole-text match covers each line match)."""
        if not self.groups:
            return set[int]().union(*(lines.spanned(p, lines.text) for p in self.prechecks))
        if any(need.isdisjoint(lines.present) for need in self.needs):
            return set()
        found: set[int] | None = None
        for low, cased in self.groups:
            hits = low.lines(lines, lowered) | cased.lines(lines, lines.text)
            found = hits if found is None else found & hits
            if not found:
                return set()
        if found and self.shape is not None:
            found = {n for n in found if not lines[n].isascii() or self.shape.search(lines.line(n, lowered))}
        return found or set()


class Engine:
    """detect-secrets' plugins and filters, and the rule file, built once."""

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.filters import heuristic
        from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
        from detect_secrets.plugins.keyword import DENYLIST, REGEX_BY_FILETYPE, KeywordDetector
        from detect_secrets.util.filetype import FileType

        declared: list[type[BasePlugin]] = list(get_mapping_from_secret_type_to_class().values())
        found = sorted(declared, key=lambda c: c.__name__)
        plugins = [cls() for cls in found if cls.__name__ not in SKIPPED]
        self.plugins = [Plugin(p, _prechecks(p), TRIGGERS.get(type(p).__name__)) for p in plugins]
        self.keyword_detector: KeywordDetector = KeywordDetector()
        self.keyword = Plugin(self.keyword_detector, (), (tuple(_literals(DENYLIST)),))
        self.keyword_groups = REGEX_BY_FILETYPE[FileType.YAML]  # config mode: quotes are optional
        self.keyword_needs = [
            (regex, group, keyword_needs(regex.pattern)) for regex, group in self.keyword_groups.items()
        ]
        self.secret_names = re.compile("|".join((*DENYLIST, "token")), re.I)
        self.entropy = Base64HighEntropyString()
        self.entropy_kind = slug(self.entropy.secret_type)
        self.tokens = re.compile(f"[{re.escape(self.entropy.charset)}]+")  # the plugin's unquoted-string form
        self.heuristic = heuristic
        from hivemem import gitleaks

        self.rules = load_rules()
        self.gitleaks = gitleaks.Rules()
        self.gitleaks_words = {r.id: Words(r.keywords) for r in self.gitleaks.rules}
        self.starts_at_keyword = frozenset(gitleaks.STARTS_AT_KEYWORD)
        self.gate = Words(ENTROPY_GATE)
        words = {w for p in [*self.plugins, self.keyword] for g in p.groups for part in g for w in part.words}
        words |= {w for r in self.rules for w in r.words.words} | set(ENTROPY_GATE) | self.gitleaks.keywords
        self.lowercase = tuple(sorted(w for w in words if w.islower()))
        self.cased = tuple(sorted(words - set(self.lowercase)))
        self.lowercase_needles, self.cased_needles = Needles(self.lowercase), Needles(self.cased)
        self._by_present: dict[frozenset[str], tuple[list[Plugin], list[Rule], list[gitleaks.Rule]]] = {}

    def plugin_names(self) -> list[str]:
        return [type(p.plugin).__name__ for p in self.plugins]

    def scan(self, text: str) -> Finding | None:
        lowered = text.lower()
        if len(lowered) != len(text):  # a few letters lower to two characters: keep offsets aligned
            lowered = text.translate(ASCII_LOWER)
        lines = Lines(text)
        lines.present = self.lowercase_needles.present(lowered) | self.cased_needles.present(text)
        checks, rules, leaks = self._candidates(lines.present)
        candidates = (self._plugins(lines, lowered, checks), self._rules(lines, lowered, rules))
        found = [f for f in (*candidates, self._gitleaks(lines, lowered, leaks)) if f is not None]
        # The earliest line wins; on one line a named format wins over the unnamed entropy finding.
        return min(found, key=lambda f: (f.line, f.kind == self.entropy_kind)) if found else None

    def _candidates(self, present: set[str]) -> tuple[list[Plugin], list[Rule], list[gitleaks.Rule]]:
        """The plugins and rules that can match a text holding these literals (one of each trigger group of a
        plugin, one keyword of a rule), remembered per set of literals: texts share a few such sets."""
        key = frozenset(present)
        found = self._by_present.get(key)
        if found is None:
            if len(self._by_present) >= CANDIDATE_SETS:
                self._by_present.clear()
            checks = [c for c in (*self.plugins, self.keyword) if not any(n.isdisjoint(key) for n in c.needs)]
            rules = [r for r in self.rules if not r.words.set.isdisjoint(key)]
            found = self._by_present[key] = (checks, rules, self.gitleaks.candidates(key))
        return found

    def _gitleaks(self, lines: Lines, lowered: str, rules: list[gitleaks.Rule]) -> Finding | None:
        """The first line where a gitleaks rule finds a secret."""
        best: tuple[int, str] | None = None
        for rule in rules:
            n = self._gitleaks_line(rule, lines, lowered, len(lines.starts) if best is None else best[0])
            if n is not None and (best is None or n < best[0]):
                best = (n, rule.id)
        return Finding(best[1], best[0] + 1) if best else None

    def _gitleaks_line(self, rule: gitleaks.Rule, lines: Lines, lowered: str, before: int) -> int | None:
        """The first line (below `before`) where one gitleaks rule finds a secret: on the whole text when its regex
        spans lines or its keywords are on many lines, else on each line holding one of its keywords."""
        glob = self.gitleaks.glob
        line_of = lambda i: lines[bisect_right(lines.starts, i) - 1]  # noqa: E731
        if rule.id in self.starts_at_keyword:
            at = rule.at_keywords(lines.text, lowered, lines.present, glob, line_of)
            return None if at is None else bisect_right(lines.starts, at) - 1
        todo = self.gitleaks_words[rule.id].lines(lines, lowered)
        if rule.whole_text or (rule.anchored is None and len(todo) > MANY_LINES):
            at = rule.first(lines.text, line_of, glob, not rule.whole_text)
            return None if at is None else bisect_right(lines.starts, at) - 1
        for k in sorted(todo):
            if k >= before:
                break
            low = lines.line(k, lowered) if rule.anchored is not None else ""
            if rule.in_line(lines[k], low, lines.present, glob):
                return k
        return None

    def _rules(self, lines: Lines, lowered: str, rules: list[Rule]) -> Finding | None:
        best: tuple[int, str] | None = None
        for rule in rules:
            n = rule.first(lines, lowered)
            if n is not None and (best is None or n < best[0]):
                best = (n, rule.kind)
        return Finding(best[1], best[0] + 1) if best else None

    def _plugins(self, lines: Lines, lowered: str, checks: list[Plugin]) -> Finding | None:
        todo: dict[int, list[Plugin]] = {}
        for check in checks:
            for n in check.lines(lines, lowered):
                todo.setdefault(n, []).append(check)
        gated = self.gate.lines(lines, lowered)
        for n in sorted(todo.keys() | gated):
            kind = self._line(lines[n], todo.get(n, []), n in gated)
            if kind is not None:
                return Finding(kind, n + 1)
        return None

    def _line(self, line: str, checks: list[Plugin], gated: bool) -> str | None:
        for check in checks:
            if any(self._secret(check, v, line) for v in self._values(check, line)):
                return check.kind
        if gated and any(self._random(v, line) for v in self.tokens.findall(line)):
            return self.entropy_kind
        return None

    def _values(self, check: Plugin, line: str) -> Iterable[str]:
        if check is self.keyword:  # only the patterns whose operator the line holds (D217)
            groups = {regex: group for regex, group, needs in self.keyword_needs if any(n in line for n in needs)}
            return self.keyword_detector.analyze_string(line, denylist_regex_to_group=groups) if groups else ()
        return check.plugin.analyze_string(line)

    def _secret(self, check: Plugin, value: str, line: str) -> bool:
        if PLACEHOLDER.search(value):
            return False
        if check is self.keyword:
            return not self._filtered(value, line, check.plugin) and not self._not_a_value(value, line)
        return not self._filtered(value)

    def _not_a_value(self, value: str, line: str) -> bool:
        """A keyword match that is no credential (hivemem's additions to the library's filters): a type
        (`password: str`), a dotted or secret-naming name without digits (`api_key = settings.API_KEY`,
        `header = 'X-API-Key'`), a number with its unit or a comment (a length in characters), a value
        without digits of a name about a secret (ABOUT_WORDS), or prose after a colon
        (`the secret: never share it`), an unquoted run of words whose first is a plain word."""
        if TYPE_NAME.match(value) or QUANTITY.fullmatch(value):
            return True
        if not any(c.isdigit() for c in value) and _about_a_secret(line):
            return True
        if not any(c.isdigit() for c in value) and (
            DOTTED_NAME.fullmatch(value) or self.secret_names.search(value.replace("-", "_"))
        ):
            return True
        first, _, rest = value.partition(" ")
        quoted = f'"{value}' in line or f"'{value}" in line
        return bool(rest) and not quoted and first.isalpha() and (first.islower() or first[1:].islower())

    def _random(self, value: str, line: str) -> bool:
        """The entropy plugin's test, on base64-shaped values that mix cases and digits."""
        return (
            len(value) > MIN_RANDOM
            and classes(value) == 3
            and not PLACEHOLDER.search(value)
            and not DIGEST_PREFIX.match(value)
            and self.entropy.calculate_shannon_entropy(value) > self.entropy.entropy_limit
            and not self._filtered(value, line, self.entropy)
        )

    def _filtered(self, value: str, line: str = "", plugin: BasePlugin | None = None) -> bool:
        """detect-secrets' default heuristic filters; the ones that judge the line only for context plugins."""
        h = self.heuristic
        if (
            h.is_sequential_string(value)
            or h.is_potential_uuid(value)
            or h.is_templated_secret(value)
            or h.is_prefixed_with_dollar_sign(value)
            or h.is_not_alphanumeric_string(value)
        ):
            return True
        return plugin is not None and (h.is_likely_id_string(value, line, plugin) or h.is_indirect_reference(line))


class Needles:
    """A set of literals, every one a text holds found in one pass over it: an Aho-Corasick automaton (pyahocorasick,
    in C), where a substring search per literal reads the whole text once for each absent one (D213)."""

    def __init__(self, words: tuple[str, ...]) -> None:
        import ahocorasick

        self.words = words
        # Short literals that occur all over ordinary text (`s.`, `ey`, `key`): collecting each of their occurrences
        # from the automaton costs more than a substring search for each, which stops at the first. So does a pass
        # of the automaton for a handful of literals (the cased ones are three): it steps through the text about
        # ten times slower than one substring search does, so below AUTOMATON_WORDS each literal is searched.
        rare = [w for w in words if w not in COMMON]
        self._built = len(rare) >= AUTOMATON_WORDS
        self.short = tuple(w for w in words if w in COMMON or not self._built)
        self._automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY, ahocorasick.KEY_STRING)
        if self._built:
            for word in rare:
                self._automaton.add_word(word, word)
            self._automaton.make_automaton()

    def present(self, text: str) -> set[str]:
        """The literals that occur in `text` (overlapping and nested ones included)."""
        if not self.words or not text:
            return set()
        found = {word for _, word in self._automaton.iter(text)} if self._built else set()
        found.update(w for w in self.short if w in text)
        return found


def _about_a_secret(line: str) -> bool:
    """Whether the line assigns to a name whose last word says what it holds is about a secret (its name, policy,
    backend...), not the secret itself."""
    m = SETTING_NAME.match(line)
    words = NAME_WORDS.findall(m.group(1)) if m else []
    return bool(words) and words[-1].lower() in ABOUT_WORDS


def keyword_needs(pattern: str) -> tuple[str, ...]:
    """What a line must hold for the keyword pattern to match in it (every line, for a pattern not recognized)."""
    found = [needs for fragment, needs in KEYWORD_OPERATORS if fragment in pattern]
    return found[0] if len(found) == 1 else ("",)


def _prechecks(plugin: BasePlugin) -> list[re.Pattern[str]]:
    suffix = SUFFIXES.get(type(plugin).__name__)
    if suffix:
        return [re.compile(suffix)]
    from detect_secrets.plugins.base import RegexBasedDetector

    if not isinstance(plugin, RegexBasedDetector):  # every plugin kept is one (SKIPPED holds the others)
        raise TypeError(f"{type(plugin).__name__}: no suffix and no denylist to find its lines by")
    return list(plugin.denylist)


def _literals(denylist: tuple[str, ...]) -> list[str]:
    """The keyword plugin's denylist as plain words: `api_?key` gives `apikey` and `api_key`."""
    return [w for entry in denylist for w in dict.fromkeys((entry.replace("_?", ""), entry.replace("_?", "_")))]
