"""Client-side space placeholders (docs/verbs.md): `@project` and `@user`, and the fixed read path."""

from __future__ import annotations

import os
import re

from hivemem.errors import InvalidParams
from hivemem.paths import never_a_project

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from hivemem.manifest import Verb

PROJECT = re.compile(r"project/[a-z0-9][a-z0-9._-]*")  # what `@project` can resolve to
NEVER_TEAM = re.compile(r"^(user|project(/.*)?)$")  # spaces that stay in the personal store (docs/team.md)


def in_team(space: str, patterns: Iterable[str]) -> bool:
    """Whether `space` lives in a mounted team store: it matches a `team.spaces` pattern (`team/*` matches every
    space under `team/`) and is not `user` or a project space (docs/team.md)."""
    if NEVER_TEAM.match(space):
        return False
    return any(space == p or (p.endswith("/*") and space.startswith(p[:-1])) for p in patterns)


def git_top(start: str) -> str | None:
    """The nearest directory at or above `start` that holds `.git`."""
    probe = start
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def project_name(directory: str) -> str:
    """The base name lowercased, runs outside `[a-z0-9._-]` made `-`, leading non-alphanumerics stripped."""
    name = re.sub(r"[^a-z0-9._-]+", "-", os.path.basename(directory).lower())
    return re.sub(r"^[^a-z0-9]+", "", name)


def project_space(cwd: str | None = None) -> str | None:
    """`project/<name>` of the git top-level directory (or the working directory), or None where there is no project.

    Outside git, the root, the home and the temporary directory are no project: a harness started there is not
    working on one. A name with no letter or digit is none either.
    """
    start = os.path.abspath(cwd or os.getcwd())
    top = git_top(start)
    if top is None and os.path.realpath(start) in never_a_project():
        return None
    name = project_name(top or start)
    return f"project/{name}" if name else None


def placeholder(value: str, cwd: str | None = None, param: str = "space") -> str:
    """`@project` and `@user` resolved (from `cwd`, default the working directory); other names unchanged."""
    if value == "@user":
        return "user"
    if value != "@project":
        return value
    space = project_space(cwd)
    if space is None:
        raise _no_project(os.path.abspath(cwd or os.getcwd()), param)
    return space


def _no_project(where: str, param: str) -> InvalidParams:
    if git_top(where) is None and os.path.realpath(where) in never_a_project():
        why = "is the root, home or temporary directory, outside any git repository"
    else:
        why = "has a name with no letter or digit"
    return InvalidParams("space", f"@project has no value in {where}: the directory {why}", param=param,
                         fix="run it inside the repository, or name the space, e.g. project/<name>")  # fmt: skip


def read_path(cwd: str | None = None, team_spaces: Iterable[str] = ()) -> list[str]:
    """The fixed read path of hooks and recall: `[@project, user, *recall.team_spaces]`, without repeats.

    Where there is no project, the path simply has none.
    """
    path: list[str] = []
    for space in (project_space(cwd), "user", *team_spaces):
        if space is not None and space not in path:
            path.append(space)
    return path


def on_read_path(space: str, team_spaces: Iterable[str] = ()) -> bool:
    """Whether some fixed read path holds `space`: `user`, a team space, or `project/<name>` of some directory."""
    return space == "user" or space in team_spaces or PROJECT.fullmatch(space) is not None


DEFAULTS: dict[str, Callable[[str | None, Iterable[str]], list[str]]] = {"read_path": read_path}


def fill_defaults(verb: Verb, params: dict[str, object], cwd: str | None,
                  team_spaces: Iterable[str]) -> dict[str, object]:  # fmt: skip
    """`params` with every absent param that has a `client_default` filled in (docs/verbs.md: recall's `spaces` is the
    fixed read path), as every client does before sending; the daemon still requires them."""
    for p in verb.params:
        if p.client_default and p.name not in params:
            params[p.name] = DEFAULTS[p.client_default](cwd, team_spaces)
            if verb.param("fixed_path") is not None:  # the daemon skips unreadable spaces of the path it filled
                params["fixed_path"] = True
    return params
