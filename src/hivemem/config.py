"""Settings declared as data (docs/operations.md), loaded from TOML and validated key by key."""

from __future__ import annotations

import os
import re

from hivemem.auth import KINDS, SPACE_RE, valid_selector
from hivemem.errors import InvalidParams

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal, NoReturn, overload

    # A setting's value: its default's type (a scalar, the review periods' table, a list of spaces or of grants).
    Value = str | int | float | bool | dict[str, int] | list[str] | list[dict[str, str]]
    # The keys by the type of their value, so that `config[key]` has the type of its setting (a test holds these
    # to the declared defaults).
    StrKey = Literal["store.path", "store.url", "daemon.startup", "mcp.tools", "embeddings.provider",
                     "embeddings.base_url", "embeddings.model", "embeddings.api_key", "team.url"]  # fmt: skip
    IntKey = Literal["daemon.startup_timeout_ms", "daemon.idle_timeout_ms", "memory.max_content_bytes",
                     "memory.max_versions", "memory.tombstone_days", "import.max_bytes", "backups.keep",
                     "recall.prompt_limit", "recall.session_limit", "recall.max_record_chars",
                     "recall.max_total_chars", "embeddings.dimensions", "embeddings.max_input_bytes",
                     "embeddings.query_timeout_ms", "embeddings.batch_timeout_ms",
                     "embeddings.warn_vectors", "team.timeout_ms"]  # fmt: skip
    FloatKey = Literal["recall.min_similarity", "search.min_similarity", "search.vector_weight"]


class Setting:
    """One config key: default, type, bounds and help."""

    __slots__ = ("choices", "default", "help", "key", "maximum", "minimum")

    def __init__(self, key: str, default: Value, help_: str, minimum: float | None = None,
                 maximum: float | None = None, *, choices: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.key, self.default, self.help = key, default, help_
        self.minimum, self.maximum, self.choices = minimum, maximum, choices


SETTINGS: tuple[Setting, ...] = (
    Setting("store.path", "", "Absolute path of the store file; empty means the XDG default."),
    Setting(
        "store.url",
        "",
        "A team store's libpq connection string, a postgresql:// URL or key=value pairs; empty "
        "means the SQLite file at store.path.",
    ),
    Setting(
        "team.url",
        "",
        "A team store mounted beside the personal store: a libpq connection string as for store.url; empty means "
        "no team store (docs/team.md).",
    ),
    Setting("team.spaces", ["team/*"], "Space patterns that live in the team store (name or prefix/*)."),
    Setting("team.timeout_ms", 1500, "How long a call waits for the team store before it is unavailable.", 100, 60000),
    Setting(
        "daemon.startup", "on-demand", "Start the daemon on demand or only by hand.", choices=("on-demand", "explicit")
    ),
    Setting("daemon.startup_timeout_ms", 5000, "How long a client waits for a daemon to start.", 100, 600000),
    Setting("daemon.idle_timeout_ms", 300000, "Idle time with no connection before the daemon exits.", 1000, 86400000),
    Setting("memory.max_content_bytes", 65536, "Largest content of one memory, in UTF-8 bytes.", 1, 262144),
    Setting("memory.max_versions", 20, "Versions kept per memory.", 1, 1000),
    Setting("memory.tombstone_days", 30, "Days a soft-deleted memory is kept before removal.", 0, 36500),
    Setting("import.max_bytes", 256 << 20, "Largest file the daemon reads for store import, in bytes.", 1, 1 << 40),
    Setting("backups.keep", 5, "Automatic repair backups kept in backups/ (the newest ones).", 1, 1000),
    Setting("governance.review_days", {"decision": 180, "task": 7}, "Default review period per kind, in days."),
    Setting("recall.prompt_limit", 8, "Records a prompt-submit recall renders.", 1, 100),
    Setting("recall.min_similarity", 0.3, "Floor for vector-only recall hits.", 0.0, 1.0),
    Setting("recall.team_spaces", [], "Team spaces appended to the fixed read path."),
    Setting("recall.session_limit", 12, "Records a session-start recall renders.", 1, 100),
    Setting("recall.hygiene_hint", False, "Session start adds one line saying how many memories are due for review."),
    Setting("recall.max_record_chars", 1000, "Longest rendered record.", 100, 100000),
    # At most 12 wire bytes per character (an escaped astral one), so the largest recall still fits a frame.
    Setting("recall.max_total_chars", 6000, "Longest rendered recall.", 200, 300000),
    Setting(
        "mcp.tools", "default", "Tools `hivemem mcp` offers: the default set of 10, or all.", choices=("default", "all")
    ),
    Setting("search.min_similarity", 0.0, "Floor for the vector list.", -1.0, 1.0),
    Setting("search.vector_weight", 1.0, "Weight of the vector list in rank fusion.", 0.0, 4.0),
    Setting("grants.unknown", [{"right": "read", "scope": "*"}], "Grants of a connection with no token."),
    Setting("embeddings.provider", "off", "Embedding provider.", choices=("off", "http", "local")),
    Setting("embeddings.base_url", "", "OpenAI-compatible endpoint (https, or http to loopback)."),
    Setting("embeddings.model", "", "Embedding model name."),
    Setting("embeddings.dimensions", 0, "Vector length; 0 means whatever the model returns.", 0, 65536),
    Setting("embeddings.api_key", "", "API key for the endpoint, if any."),
    Setting("embeddings.max_input_bytes", 32768, "Longest text sent to the provider.", 256, 1048576),
    Setting("embeddings.query_timeout_ms", 2000, "Query embedding budget.", 10, 600000),
    Setting("embeddings.batch_timeout_ms", 30000, "Batch embedding budget.", 100, 3600000),
    Setting("embeddings.warn_vectors", 100000, "Doctor warns above this many vectors.", 1, 1 << 40),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}


TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


class Config:
    """Validated settings, read with `config["section.key"]`."""

    def __init__(self, values: dict[str, Value] | None = None, path: str = "") -> None:
        # Each instance gets its own copy of list and table defaults: a caller that changes one
        # must change neither the declared default nor another Config.
        self.values: dict[str, object] = {s.key: _fresh(s.default) for s in SETTINGS}
        self.values.update(values or {})
        self.explicit = frozenset(values or {})  # the keys the file sets, as opposed to defaults
        self.path = path

    if TYPE_CHECKING:

        @overload
        def __getitem__(self, key: StrKey) -> str: ...
        @overload
        def __getitem__(self, key: IntKey) -> int: ...
        @overload
        def __getitem__(self, key: FloatKey) -> float: ...
        @overload
        def __getitem__(self, key: Literal["recall.hygiene_hint"]) -> bool: ...
        @overload
        def __getitem__(self, key: Literal["governance.review_days"]) -> dict[str, int]: ...
        @overload
        def __getitem__(self, key: Literal["recall.team_spaces", "team.spaces"]) -> list[str]: ...
        @overload
        def __getitem__(self, key: Literal["grants.unknown"]) -> list[dict[str, str]]: ...

    def __getitem__(self, key: str) -> object:
        return self.values[key]


def _fresh(value: object) -> object:
    """A copy of a setting's value (strings, numbers, booleans, lists and tables); `copy` costs the warm path."""
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


def config_path() -> str:
    """`$XDG_CONFIG_HOME/hivemem/config.toml` (docs/schema.md)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "hivemem", "config.toml")


def load(path: str | None = None) -> Config:
    """Read and validate the config file; a missing file means every default."""
    path = path or config_path()
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return Config(path=path)
    import tomllib  # only paid for when a config file exists

    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidParams("config", f"{path}: not valid TOML: {exc}", key="", path=path) from None
    return Config(validate_document(doc), path=path)


def validate_document(doc: dict[str, object]) -> dict[str, Value]:
    """Flatten `[section] key = value` into checked `section.key` values."""
    values: dict[str, Value] = {}
    for section, table in doc.items():
        if not isinstance(table, dict):
            _bad(section, "must be a table")
        for name, value in table.items():
            key = f"{section}.{name}"
            values[key] = validate_value(key, value)
    return values


def validate_value(key: str, value: object) -> Value:
    """Check one value against its setting; raise invalid_params.config naming the key."""
    setting = BY_KEY.get(key)
    if setting is None:
        _bad(key, "unknown key")
    special = _SPECIAL.get(key)
    if special is not None:
        return special(key, value)
    return _check_scalar(setting, value)


def _check_scalar(setting: Setting, value: object) -> str | int | float:
    default = setting.default
    kind = TYPE_NAMES.get(type(default), "a value")
    if (isinstance(default, bool) or type(value) is bool) and type(value) is not type(default):
        _bad(setting.key, f"must be {kind}")
    if isinstance(default, float) and isinstance(value, int):
        value = float(value)
    if type(value) is not type(default) or not isinstance(value, str | int | float):
        _bad(setting.key, f"must be {kind}")
    if isinstance(value, str):  # only a string setting has choices, and only a number bounds
        if setting.choices and value not in setting.choices:
            _bad(setting.key, f"must be one of {', '.join(setting.choices)}")
        return value
    if setting.minimum is not None and value < setting.minimum:
        _bad(setting.key, f"must be at least {setting.minimum}")
    if setting.maximum is not None and value > setting.maximum:
        _bad(setting.key, f"must be at most {setting.maximum}")
    return value


def _check_store_path(key: str, value: object) -> str:
    if not isinstance(value, str) or (value and not os.path.isabs(value)):
        _bad(key, "must be an absolute path or empty")
    return str(value)


def _check_review_days(key: str, value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        _bad(key, "must be a table of kind = days")
    for kind, days in value.items():
        if kind not in KINDS or type(days) is not int or not 1 <= days <= 36500:
            _bad(key, f"{kind}: must be a kind with a number of days from 1 to 36500")
    return dict(value)


def _check_spaces(key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(s, str) and SPACE_RE.match(s) for s in value):
        _bad(key, "must be a list of space names")
    return list(value)


def _check_team_spaces(key: str, value: object) -> list[str]:
    """Space names or `prefix/*` patterns; never `user` or `project/...`, which stay personal (docs/team.md)."""
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        _bad(key, "must be a list of space names or prefix/* patterns")
    for pattern in value:
        name = pattern[:-2] if pattern.endswith("/*") else pattern
        if not SPACE_RE.match(name):
            _bad(key, f"{pattern!r} is neither a space name nor a prefix/* pattern")
        if name == "user" or name == "project" or name.startswith("project/"):
            _bad(key, f"{pattern!r}: user and project spaces stay in the personal store")
    return list(value)


def _check_grants(key: str, value: object) -> list[dict[str, str]]:
    if not isinstance(value, list):
        _bad(key, "must be a list of {right, scope} tables")
    for grant in value:
        if not isinstance(grant, dict) or set(grant) != {"right", "scope"} or grant["right"] not in ("read", "write"):
            _bad(key, "each grant is {right = read|write, scope = selector}")
        if not valid_selector(grant["scope"]):
            _bad(key, f"bad scope {grant['scope']!r}")
    return [dict(g) for g in value]


LOOPBACK_NAMES = ("localhost", "localhost.")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: addresses that never leave the machine."""
    import ipaddress

    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_embeddings_url(url: str, key: str = "embeddings.base_url") -> str:
    """An embeddings `base_url`: https, or http to a loopback host (docs/embeddings.md), else
    invalid_params.embeddings_url."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018  (a bad port raises ValueError)
    except ValueError:
        host, parts = "", urlsplit("")
    ok = bool(host) and (parts.scheme == "https" or (parts.scheme == "http" and is_loopback(host)))
    if not ok or parts.username or parts.password:
        raise InvalidParams(
            "embeddings_url",
            f"config key {key}: {url!r} must be https, or http to a loopback host, with no credentials in it",
            key=key,
        )
    return url


def _check_base_url(key: str, value: object) -> str:
    if not isinstance(value, str):
        _bad(key, "must be a string")
    return check_embeddings_url(value, key) if value else ""


def _check_store_url(key: str, value: object) -> str:
    if not isinstance(value, str):
        _bad(key, "must be a string")
    if value and not (value.startswith(("postgresql://", "postgres://")) or _CONNINFO.match(value)):
        _bad(key, "must be empty, a postgresql:// URL or libpq's key=value pairs (host=... dbname=...)")
    return str(value)


_CONNINFO = re.compile(r"\s*[A-Za-z_]+\s*=")  # libpq's key=value form; libpq itself reads the rest (libpq.py)


def libpq_environment() -> dict[str, str]:
    """The variables libpq reads (`PG*`): a team store's host, TLS mode, service and password file may come from
    them, as they do for the daemon that this environment starts (docs/team.md)."""
    return {k: v for k, v in os.environ.items() if k.startswith("PG")}


def _bad(key: str, why: str) -> NoReturn:
    raise InvalidParams("config", f"config key {key}: {why}", key=key)


_SPECIAL: dict[str, Callable[[str, object], Value]] = {
    "store.path": _check_store_path,
    "store.url": _check_store_url,
    "governance.review_days": _check_review_days,
    "recall.team_spaces": _check_spaces,
    "team.url": _check_store_url,
    "team.spaces": _check_team_spaces,
    "grants.unknown": _check_grants,
    "embeddings.base_url": _check_base_url,
}


def read_document(path: str) -> dict[str, object]:
    """The raw TOML document at `path` ({} when absent)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}
    import tomllib

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidParams("config", f"{path}: not valid TOML: {exc}", key="", path=path) from None


def parse_value(key: str, text: str) -> Value:
    """A command-line value: TOML syntax (`1000`, `true`, `["a"]`), else a plain string."""
    import tomllib

    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return validate_value(key, value)


def set_value(path: str, key: str, text: str) -> Value:
    """Validate `key = text`, write the whole file 0600 atomically; returns the stored value."""
    value = parse_value(key, text)
    doc = read_document(path)
    validate_document(doc)
    section, _, name = key.partition(".")
    table = doc.setdefault(section, {})
    assert isinstance(table, dict)  # validate_document refused a section that is not a table
    table[name] = value
    validate_document(doc)
    from hivemem import paths

    data = dump(doc, key)
    paths.ensure_dir(os.path.dirname(path))
    paths.write_private(path, data)
    return value


def dump(doc: dict[str, object], key: str = "") -> bytes:
    """The document as TOML (UTF-8), written by tomli-w and read back before it is used: bytes that would not
    read back as the same document (a lone surrogate, say) are refused, so no written config breaks every
    command after it (docs/decisions.md D244)."""
    import tomllib

    import tomli_w

    try:
        data = tomli_w.dumps(doc).encode("utf-8")
        same = tomllib.loads(data.decode("utf-8")) == doc
    except (UnicodeError, TypeError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise InvalidParams("config", f"config key {key}: the value cannot be written as TOML: {exc}",
                            key=key) from None  # fmt: skip
    if not same:
        raise InvalidParams("config", f"config key {key}: the value does not read back as written", key=key)
    return data


def effective(config: Config) -> dict[str, object]:
    """Every setting with its value in force."""
    return {s.key: config.values[s.key] for s in SETTINGS}
