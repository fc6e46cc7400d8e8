"""Client-side space placeholders (SPEC 3): `@project` and `@user`, and the fixed read path."""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from hivemem.manifest import Verb


def project_space(cwd: str | None = None) -> str:
    """`project/<name>` from the git top-level directory (or the working directory) name."""
    start = os.path.abspath(cwd or os.getcwd())
    top = start
    probe = start
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            top = probe
            break
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    name = re.sub(r"[^a-z0-9._-]+", "-", os.path.basename(top).lower())
    name = re.sub(r"^[^a-z0-9]+", "", name)
    return f"project/{name or 'root'}"


def placeholder(value: str, cwd: str | None = None) -> str:
    """`@project` and `@user` resolved (from `cwd`, default the working directory); other names unchanged."""
    if value == "@project":
        return project_space(cwd)
    if value == "@user":
        return "user"
    return value


def read_path(cwd: str | None = None, team_spaces: Iterable[str] = ()) -> list[str]:
    """The fixed read path of hooks and recall: `[@project, user, *recall.team_spaces]`, without repeats."""
    path: list[str] = []
    for space in (project_space(cwd), "user", *team_spaces):
        if space not in path:
            path.append(space)
    return path


DEFAULTS: dict[str, Callable[[str | None, Iterable[str]], Any]] = {"read_path": read_path}


def fill_defaults(verb: Verb, params: dict[str, Any], cwd: str | None, team_spaces: Iterable[str]) -> dict[str, Any]:
    """`params` with every absent param that has a `client_default` filled in (SPEC 3: recall's `spaces` is the
    fixed read path), as every client does before sending; the daemon still requires them."""
    for p in verb.params:
        if p.client_default and p.name not in params:
            params[p.name] = DEFAULTS[p.client_default](cwd, team_spaces)
    return params
