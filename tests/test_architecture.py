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
ENV_READERS = ("paths.py", "config.py")
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
WARM_FORBIDDEN = ("apsw", "sqlite3", "_sqlite3", "numpy", "mcp", "pydantic", "http.client", "urllib.request",
                  "asyncio", "httpx", "requests", "click", "detect_secrets", "yaml")  # fmt: skip


@dataclass
class Module:
    rel: str  # path relative to src/hivemem, e.g. "store/db.py"
    name: str  # dotted module name, e.g. "hivemem.store.db"
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
    is_package = module.rel.endswith("__init__.py")
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.name.split(".")
                parent = parent if is_package else parent[:-1]
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield node.lineno, base
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def names(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(selected: list[Module], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{m.rel}:{line} imports {name}" for m in selected for line, name in imports(m) if names(name, forbidden)]


def test_the_walk_sees_the_code() -> None:
    rels = {m.rel for m in MODULES}
    assert {"store/db.py", "cli/output.py", "daemon/server.py", "paths.py", "config.py"} <= rels
    assert violations([m for m in MODULES if m.rel == "daemon/server.py"], ("apsw",)), "the checker must see imports"


def test_core_never_imports_adapters_or_the_event_loop() -> None:
    core = [m for m in MODULES if m.package in CORE]
    assert core
    assert violations(core, CORE_FORBIDDEN) == []


def test_adapters_reach_the_store_only_through_ops_or_client() -> None:
    adapters = [m for m in MODULES if m.package in ADAPTERS and m.package != "daemon"]
    assert adapters
    assert violations(adapters, ("apsw", "sqlite3", "hivemem.store")) == []


def test_adapters_never_import_each_other() -> None:
    bad = []
    for m in (m for m in MODULES if m.package in ADAPTERS):
        others = tuple(f"hivemem.{a}" for a in ADAPTERS if a != m.package)
        bad += violations([m], others)
    assert bad == []


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
