"""The layout is the architecture (STYLE.md): import rules checked with `ast`, a lean warm CLI path, `__all__`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import hivemem
from conftest import Home

SRC = os.path.dirname(hivemem.__file__)
CORE = ("store", "search", "embeddings")
ADAPTERS = ("cli", "daemon", "mcp", "hooks", "web")
CORE_FORBIDDEN = ("hivemem.ops", "hivemem.protocol", "hivemem.client", *(f"hivemem.{a}" for a in ADAPTERS),
                  "asyncio", "click", "mcp")  # fmt: skip
# Top-level modules by layer. Pure modules hold data and rules; services reach the store (ops, and
# doctor through the core's integrity checks) or the daemon (client); adapters talk through services.
PURE = ("auth.py", "records.py", "schemas.py", "errors.py", "manifest.py", "config.py", "paths.py", "spaces.py",
        "secrets.py", "gitleaks.py", "params.py", "protocol.py", "render.py", "peer.py", "libpq.py",
        "progress.py", "credentials.py", "dates.py", "cursors.py", "moves.py")  # fmt: skip
SERVICES = ("ops.py", "client.py", "doctor.py")
ENTRY = ("__init__.py", "__main__.py")
PURE_FORBIDDEN = ("hivemem.store", "hivemem.search", "hivemem.embeddings", "hivemem.ops", "hivemem.client",
                  "hivemem.doctor", *(f"hivemem.{a}" for a in ADAPTERS), "apsw", "sqlite3", "asyncio",
                  "mcp")  # fmt: skip
# The composition root: the one module that may start the other adapters, and that no module imports
# (the `python -m hivemem` entry point aside).
ROOT = "cli/main.py"
ROOT_STARTS = ("hivemem.daemon.main", "hivemem.hooks.main", "hivemem.mcp.server", "hivemem.web.server")
# Cycles that exist today and are on their way out; the test fails when one is gone and still listed.
KNOWN_CYCLES: list[set[str]] = []
ENV_READERS = ("paths.py", "config.py")
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
WARM_FORBIDDEN = ("apsw", "sqlite3", "_sqlite3", "numpy", "mcp", "pydantic", "http.client", "urllib.request",
                  "asyncio", "httpx", "requests", "click", "detect_secrets", "yaml", "psycopg")  # fmt: skip


@dataclass
class Module:
    rel: str  # path relative to src/hivemem, e.g. "store/sqlite/db.py"
    name: str  # dotted module name, e.g. "hivemem.store.sqlite.db"
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.rel.split("/")[0] if "/" in self.rel else ""


def modules() -> list[Module]:
    found = []
    for base, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(base, f)
                rel = os.path.relpath(path, SRC).replace(os.sep, "/")
                parts = ["hivemem", *rel[:-3].split("/")]
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                with open(path, encoding="utf-8") as fh:
                    found.append(Module(rel, name, ast.parse(fh.read(), rel)))
    return found


MODULES = modules()


def imports(module: Module) -> Iterator[tuple[int, str]]:
    """Every module name an import statement names (absolute; `from x import y` yields x and x.y)."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, node)
            yield node.lineno, base
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module a `from ... import` names, with relative levels resolved."""
    base = node.module or ""
    if not node.level:
        return base
    parent = module.name.split(".")
    parent = parent if module.rel.endswith("__init__.py") else parent[:-1]
    parent = parent[: len(parent) - node.level + 1]
    return ".".join([*parent, base] if base else parent)


def names(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(selected: list[Module], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{m.rel}:{line} imports {name}" for m in selected for line, name in imports(m) if names(name, forbidden)]


def test_the_walk_sees_the_code() -> None:
    rels = {m.rel for m in MODULES}
    assert {"store/sqlite/db.py", "cli/output.py", "daemon/server.py", "paths.py", "config.py"} <= rels
    assert violations([m for m in MODULES if m.rel == "store/sqlite/db.py"], ("apsw",)), "the checker must see imports"


def test_core_never_imports_adapters_or_the_event_loop() -> None:
    core = [m for m in MODULES if m.package in CORE]
    assert core
    assert violations(core, CORE_FORBIDDEN) == []


def test_adapters_reach_the_store_only_through_ops_or_client() -> None:
    adapters = [m for m in MODULES if m.package in ADAPTERS and m.package != "daemon"]
    assert adapters
    assert violations(adapters, ("apsw", "sqlite3", "hivemem.store")) == []


def test_adapters_never_import_each_other_but_the_root_starts_them() -> None:
    bad = []
    for m in (m for m in MODULES if m.package in ADAPTERS):
        others = tuple(f"hivemem.{a}" for a in ADAPTERS if a != m.package)
        bad += [hit for hit in violations([m], others) if not (m.rel == ROOT and names(hit.split()[-1], ROOT_STARTS))]
    assert bad == []
    root = next(m for m in MODULES if m.rel == ROOT)
    started = {name for _, name in imports(root) if names(name, ROOT_STARTS)}
    assert {s for s in ROOT_STARTS if s in started} == set(ROOT_STARTS), (
        "the root starts the daemon, MCP, hooks and the UI"
    )


def test_nothing_imports_the_composition_root() -> None:
    importers = {m.rel for m in MODULES for _, name in imports(m) if names(name, ("hivemem.cli.main",))}
    assert importers == {"__main__.py"}


def test_every_module_has_a_layer() -> None:
    def layer(m: Module) -> str | None:
        if m.package in CORE:
            return "core"
        if m.package in ADAPTERS:
            return "adapter"
        return next((name for name, rels in LAYERS.items() if m.rel in rels), None)

    LAYERS = {"pure": PURE, "service": SERVICES, "entry": ENTRY}
    assert [m.rel for m in MODULES if layer(m) is None] == []


def test_the_authorization_model_does_no_io() -> None:
    """auth.py answers "may this principal do that?" from its arguments alone: it imports `re` and nothing else."""
    auth_module = next(m for m in MODULES if m.rel == "auth.py")
    imported = {name.split(".")[0] for _, name in imports(auth_module)} - {"__future__", "collections"}
    assert imported == {"re"}


def test_pure_modules_reach_no_store_service_or_adapter() -> None:
    pure = [m for m in MODULES if m.rel in PURE]
    assert len(pure) == len(PURE)
    assert violations(pure, PURE_FORBIDDEN) == []


def test_services_never_import_adapters() -> None:
    services = [m for m in MODULES if m.rel in SERVICES]
    assert len(services) == len(SERVICES)
    assert violations(services, tuple(f"hivemem.{a}" for a in ADAPTERS)) == []


BACKEND_SPECIFIC = ("hivemem.store.sqlite", "hivemem.store.postgres", "apsw", "sqlite3", "psycopg", "psycopg_binary")


# libpq.py reads a team store's connection string with libpq's own parser (docs/decisions.md D345), through these
# parts of psycopg only, never its connections, and only inside a function: psycopg is the `team` extra.
CONNINFO_PARSER = ("psycopg.conninfo", "psycopg.errors", "psycopg.pq")


def test_nothing_above_the_store_knows_the_backend() -> None:
    """Above `store/`, code speaks to the Store interface (the daemon too, which opens the store through
    `open_store`, SQLite or PostgreSQL as the config says); doctor checks the local file through `store/local.py`.
    No module outside `store/` imports either backend package or a database binding, even inside a function,
    but libpq.py, which reads a connection string with psycopg's parser."""
    above = [m for m in MODULES if m.package != "store"]
    assert len(above) > 50
    assert violations([m for m in above if m.rel != "libpq.py"], BACKEND_SPECIFIC) == []
    libpq = next(m for m in above if m.rel == "libpq.py")
    parsing = [name for _, name in imports(libpq) if names(name, BACKEND_SPECIFIC)]
    assert parsing and all(names(name, CONNINFO_PARSER) for name in parsing), parsing
    assert [name for _, name in top_level_imports(libpq) if names(name, BACKEND_SPECIFIC)] == []


def top_level_imports(module: Module) -> Iterator[tuple[int, str]]:
    """The imports a module runs when it is imported (those outside any function)."""
    top = Module(module.rel, module.name, ast.Module(body=[n for n in module.tree.body if isinstance(
        n, ast.Import | ast.ImportFrom | ast.If | ast.Try)], type_ignores=[]))  # fmt: skip
    return imports(top)


def subclassed_sqlite_classes(module: Module) -> list[str]:
    """The classes of `module` with a base it imported from `store/sqlite/` (a class, or one reached through an
    imported module), or one named SQLite*."""
    imported: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom) and names(absolute(module, node), ("hivemem.store.sqlite",)):
            imported |= {alias.asname or alias.name for alias in node.names}
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                root = base
                while isinstance(root, ast.Attribute):
                    root = root.value
                name = root.id if isinstance(root, ast.Name) else ""
                if name in imported or name.startswith("SQLite"):
                    found.append(f"{module.rel}:{node.lineno} {node.name}({ast.unparse(base)})")
    return found


def test_the_team_store_is_composed_not_a_subclass_of_the_sqlite_store() -> None:
    """Both stores hold the shared repositories of store/repositories.py; no class of store/postgres/ subclasses one
    of store/sqlite/ (docs/decisions.md D366), so nothing SQLite does runs on the team store unless it is chosen."""
    probe = Module("store/postgres/x.py", "hivemem.store.postgres.x", ast.parse(
        "from hivemem.store.sqlite import store\nfrom ..sqlite.store import SQLiteStore as S\n"
        "class A(store.SQLiteMemories): ...\nclass B(S): ...\nclass C: ..."))  # fmt: skip
    assert [hit.split()[-1] for hit in subclassed_sqlite_classes(probe)] == ["A(store.SQLiteMemories)", "B(S)"]
    team = [m for m in MODULES if m.rel.startswith("store/postgres/")]
    assert len(team) >= 5
    assert [hit for m in team for hit in subclassed_sqlite_classes(m)] == []


def test_ops_and_search_never_see_a_connection() -> None:
    """No `.conn`, and no SQL keyword in a string, in ops.py or search/: the Store's methods do that."""
    checked = [m for m in MODULES if m.rel == "ops.py" or m.package == "search"]
    found = []
    for m in checked:
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Attribute) and node.attr in ("conn", "execute"):
                found.append(f"{m.rel}:{node.lineno} .{node.attr}")
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            if any(k in text for k in ("SELECT ", "INSERT ", "UPDATE ", "DELETE FROM", "PRAGMA")):
                found.append(f"{m.rel}: SQL in {text[:40]!r}")
    assert found == []


def test_doctor_reaches_the_store_only_through_the_integrity_checks() -> None:
    doctor = next(m for m in MODULES if m.rel == "doctor.py")
    reached = {name for _, name in imports(doctor) if names(name, ("hivemem.store", "apsw", "sqlite3"))}
    assert reached == {"hivemem.store", "hivemem.store.local"}


def import_graph() -> dict[str, set[str]]:
    """Module → the hivemem modules it imports, anywhere in it (function-local imports too).

    `from x import y` is an edge to x.y when that is a module, else to x. Edges to the root package
    are left out: it only re-exports lazily, and every import of a submodule runs it first.
    """
    known = {m.name for m in MODULES}
    graph: dict[str, set[str]] = {m.name: set() for m in MODULES}
    for m in MODULES:
        for node in ast.walk(m.tree):
            for target in _targets(m, node, known):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target not in (m.name, "hivemem"):
                    graph[m.name].add(target)
    return graph


def _targets(module: Module, node: ast.AST, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if names(a.name, ("hivemem",))]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = absolute(module, node)
    if not names(base, ("hivemem",)):
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module: each can import itself back."""
    reach = {}
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += graph.get(node, ())
        reach[start] = seen
    groups: list[set[str]] = []
    for node in sorted(graph):
        if node in reach[node] and not any(node in g for g in groups):
            groups.append({node} | {other for other in reach[node] if node in reach[other]})
    return groups


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [{"a", "b", "c"}, {"e"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    real = import_graph()
    assert "hivemem.cli.output" in real["hivemem.cli.verbs"], "the graph must see `from package import module`"
    assert "hivemem.daemon.main" in real["hivemem.cli.main"], "the graph must see function-local imports"


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(import_graph())
    assert [c for c in found if c not in KNOWN_CYCLES] == []
    assert [c for c in KNOWN_CYCLES if c not in found] == [], "a listed cycle is gone: remove it from KNOWN_CYCLES"


def handler_keys() -> list[str]:
    """The keys written in ops.py's HANDLERS literal, repeats included (a dict keeps only the last)."""
    ops_module = next(m for m in MODULES if m.rel == "ops.py")
    for node in ast.walk(ops_module.tree):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if node.target.id == "HANDLERS" and isinstance(node.value, ast.Dict):
            return [str(k.value) for k in node.value.keys if isinstance(k, ast.Constant)]
    raise AssertionError("ops.py has no HANDLERS literal")


def test_every_manifest_verb_has_exactly_one_handler_and_every_handler_a_verb() -> None:
    from hivemem import ops
    from hivemem.manifest import VERBS

    declared = [v.name for v in VERBS]
    assert len(declared) == len(set(declared)), "a verb is declared twice in the manifest"
    written = handler_keys()
    assert sorted(k for k in set(written) if written.count(k) > 1) == [], "a verb is handled twice"
    assert sorted(written) == sorted(ops.HANDLERS), "HANDLERS is the literal table, nothing added elsewhere"
    assert sorted(set(declared) - set(ops.HANDLERS)) == [], "manifest verbs without a handler"
    assert sorted(set(ops.HANDLERS) - set(declared)) == [], "handlers for verbs the manifest does not declare"
    assert all(callable(handler) for handler in ops.HANDLERS.values())


def env_reads(module: Module) -> list[str]:
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute) and node.attr in ENV_NAMES:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                found.append(f"{module.rel}:{node.lineno} os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{module.rel}:{node.lineno} from os import {a.name}" for a in node.names if a.name in ENV_NAMES]
    return found


def test_only_paths_and_config_read_the_environment() -> None:
    assert env_reads(next(m for m in MODULES if m.rel == "paths.py")), "the checker must see paths.py read it"
    bad = [hit for m in MODULES if m.rel not in ENV_READERS for hit in env_reads(m)]
    assert bad == []


def prints(module: Module) -> list[str]:
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"{module.rel}:{node.lineno} print()")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("stdout", "stderr", "__stdout__", "__stderr__")
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(f"{module.rel}:{node.lineno} sys.{node.attr}")
    return found


def test_only_cli_output_prints() -> None:
    assert prints(next(m for m in MODULES if m.rel == "cli/output.py"))
    bad = [hit for m in MODULES if m.rel != "cli/output.py" for hit in prints(m)]
    assert bad == []


def test_extension_loading_is_never_enabled() -> None:
    bad = [
        f"{m.rel}:{node.lineno}"
        for m in MODULES
        for node in ast.walk(m.tree)
        if isinstance(node, ast.Attribute | ast.Name)
        and (node.attr if isinstance(node, ast.Attribute) else node.id).lower().replace("_", "")
        in ("enableloadextension", "loadextension", "enableloadextensions")
    ]
    assert bad == []


def test_no_grab_bag_modules() -> None:
    assert [
        m.rel for m in MODULES if os.path.basename(m.rel) in ("utils.py", "helpers.py", "misc.py", "common.py")
    ] == []


def imported_modules(importtime_stderr: str) -> set[str]:
    found = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                found.add(name)
    return found


def test_warm_cli_path_is_lean(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "warm path")
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hivemem", "memory", "search", "--query", "warm", "--json"],
        env=env, cwd=home.base, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert b'"m1"' in proc.stdout
    loaded = imported_modules(proc.stderr.decode())
    assert {"hivemem.cli", "hivemem.client"} <= loaded, "importtime output was not parsed"
    assert sorted(n for n in loaded if names(n, WARM_FORBIDDEN)) == []


def test_a_daemon_on_the_sqlite_store_without_embeddings_loads_neither_psycopg_nor_numpy(home: Home) -> None:
    """The single-machine path of a base install (docs/decisions.md D346): the team store's driver and the vector
    index's NumPy are extras, so the daemon serving a SQLite file with embeddings off must not load them; their
    shared libraries would show in its memory map."""
    home.ok("memory", "add", "--space", "user", "--content", "the base path")
    assert home.ok("memory", "search", "--query", "base")["results"]
    pid = home.daemon_pid()
    assert pid is not None
    with open(f"/proc/{pid}/maps") as f:
        mapped = {line.split()[-1] for line in f if "/" in line}
    assert any("apsw" in path for path in mapped), "the map was not read"  # the SQLite binding is loaded
    assert sorted(path for path in mapped if "psycopg" in path or "numpy" in path) == []


def optional_dependencies() -> dict[str, list[str]]:
    import tomllib

    with open(os.path.join(SRC, "..", "..", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    return {"": project["dependencies"], **project["optional-dependencies"]}


def test_the_test_extra_installs_every_other_extra_and_the_base_neither_driver_nor_numpy() -> None:
    """CI installs `.[test]`, so every extra is installed and tested there (the fuzz target's atheris aside, which
    the soak tier installs); a base install stays light (docs/decisions.md D346)."""
    extras = optional_dependencies()
    wanted = {req for extra, reqs in extras.items() if extra not in ("", "test", "fuzz") for req in reqs}
    assert {"team", "embeddings", "local"} <= extras.keys()
    assert sorted(wanted - set(extras["test"])) == []
    assert [req for req in extras[""] if req.startswith(("psycopg", "numpy"))] == []


def test_importing_the_package_or_cli_loads_no_sqlite_binding() -> None:
    code = "import sys, hivemem, hivemem.cli; print(sorted(m for m in ('apsw', 'sqlite3') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=True).stdout
    assert out.strip() == b"[]"


def test_public_api() -> None:
    assert sorted(hivemem.__all__) == ["Store", "errors", "open_store"]
    from hivemem import errors, store

    assert hivemem.open_store is store.open_store
    assert hivemem.Store is store.Store
    assert hivemem.errors is errors
    assert isinstance(hivemem.__version__, str)
    with pytest.raises(AttributeError):
        _ = hivemem.no_such_name  # type: ignore[attr-defined]


def test_the_version_is_written_once() -> None:
    import importlib.metadata
    import tomllib

    with open(os.path.join(SRC, "..", "..", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("hivemem") == hivemem.__version__


def test_src_cites_the_projects_own_documents_not_a_spec_section() -> None:
    """A citation a reader can follow: docs/… or a decision, never "SPEC x.y" (the repository holds no SPEC)."""
    import re

    citation = re.compile(r"\bSPEC\b(?!IAL)")
    found = []
    for root, _, files in os.walk(SRC):
        for name in files:
            if name.endswith((".py", ".toml", ".md", ".txt", ".html", ".css", ".js")):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    found += [f"{path}:{n}" for n, line in enumerate(f, 1) if citation.search(line)]
    assert len(found) == 0, found


def test_readme_and_docs_cite_no_numbered_section_of_a_specification() -> None:
    """The docs point a reader at the repository's own documents or a decision (docs/decisions.md D341), never at
    "SPEC 12.1" or "the specification's section 16", which a reader of the repository cannot open."""
    import re

    numbered = re.compile(r"\bSPEC\s+\d|specification's section\s+\d|\bsection\s+\d+(\.\d+)*\s+of the spec", re.I)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = [os.path.join(root, "README.md")]
    files += [
        os.path.join(d, n) for d, _, names in os.walk(os.path.join(root, "docs")) for n in names if n.endswith(".md")
    ]
    assert len(files) > 15
    # the tests and benchmarks too (this file aside, which quotes the forms it refuses)
    files += [
        os.path.join(root, folder, n)
        for folder in ("tests", "bench")
        for n in os.listdir(os.path.join(root, folder))
        if n.endswith((".py", ".md")) and n != os.path.basename(__file__)
    ]
    found = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            found += [f"{path}:{n}: {line.strip()}" for n, line in enumerate(f, 1) if numbered.search(line)]
    assert found == []
