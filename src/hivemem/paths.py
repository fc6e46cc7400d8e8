"""Where hivemem keeps its files (docs/schema.md), with 0700/0600 modes and lstat checks."""

from __future__ import annotations

import contextlib
import os
import stat

from hivemem.errors import Denied, Failed

SOCKET_MAX = 100


class Paths:
    """Every file and directory of one store."""

    __slots__ = ("config", "state", "store", "team")

    def __init__(self, store: str, config: str, state: str, team: bool = False) -> None:
        self.store, self.config, self.state, self.team = store, config, state, team

    @property
    def data_dir(self) -> str:
        return os.path.dirname(self.store)

    @property
    def owner_key(self) -> str:
        """Beside the store file; for a team store (`team`: store.url is set), beside the config (docs/team.md)."""
        return os.path.join(os.path.dirname(self.config) if self.team else self.data_dir, "owner.key")

    @property
    def store_lock(self) -> str:
        return self.store + ".lock"

    @property
    def backups(self) -> str:
        return os.path.join(self.data_dir, "backups")

    @property
    def exports(self) -> str:
        return os.path.join(self.data_dir, "exports")

    @property
    def logs(self) -> str:
        return os.path.join(self.state, "logs")

    @property
    def socket(self) -> str:
        from hashlib import sha256

        key = sha256(self.store.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        if runtime:
            path = os.path.join(runtime, "hivemem", f"{key}.sock")
            if len(path.encode()) <= SOCKET_MAX:
                return path
        return os.path.join(f"/tmp/hivemem-{os.getuid()}", f"{key}.sock")

    @property
    def socket_lock(self) -> str:
        return self.socket + ".lock"


def _xdg(var: str, fallback: str) -> str:
    value = os.environ.get(var)
    return value if value and os.path.isabs(value) else os.path.join(os.path.expanduser("~"), fallback)


def resolve(store_path: str = "", config_file: str = "", team: bool = False) -> Paths:
    """Paths for the configured store (absolute `store.path`) or the XDG default; `team` when store.url is set."""
    store = store_path or os.path.join(_xdg("XDG_DATA_HOME", ".local/share"), "hivemem", "store.db")
    config = config_file or os.path.join(_xdg("XDG_CONFIG_HOME", ".config"), "hivemem", "config.toml")
    state = os.path.join(_xdg("XDG_STATE_HOME", ".local/state"), "hivemem")
    return Paths(os.path.abspath(store), config, state, team)


def check_not_link(path: str, *, directory: bool = False) -> bool:
    """Refuse a symlink or another user's file; True if the path exists."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise Denied("path", f"{path} is a symbolic link; hivemem refuses it", path=path)
    if st.st_uid != os.getuid():
        raise Denied("path", f"{path} is owned by another user", path=path)
    if directory and not stat.S_ISDIR(st.st_mode):
        raise Denied("path", f"{path} is not a directory", path=path)
    return True


def ensure_dir(path: str) -> str:
    """Create `path` (and missing parents) 0700; an existing one is checked, never chmodded (docs/protocol.md)."""
    if not check_not_link(path, directory=True):
        _make_dir(path)
        check_not_link(path, directory=True)
    if os.lstat(path).st_mode & 0o022:
        raise Denied("path", f"{path} is writable by other users; hivemem refuses it", path=path,
                     fix=f"chmod go-w {path}")  # fmt: skip
    return path


def _make_dir(path: str) -> None:
    """mkdir 0700 (parents first); only a directory made here is chmodded, against an odd umask."""
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.exists(parent):
        ensure_dir(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:  # another process made it first: the caller's checks apply to it as found
        return
    os.chmod(path, 0o700)


def check_socket_dir(path: str) -> bool:
    """The socket directory must be ours, a real directory, mode 0700 (docs/schema.md); True if it exists."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    problem = _socket_dir_problem(st)
    if problem:
        raise Failed("socket_dir", f"{path} {problem}; hivemem will not use it", path=path,
                     fix=_socket_dir_fix(path, st))  # fmt: skip
    return True


def _socket_dir_problem(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700"
    return ""


def _socket_dir_fix(path: str, st: os.stat_result) -> str:
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        return f"chmod 700 {path}"
    return (f"someone else made {path}: set XDG_RUNTIME_DIR to a directory only you can write "
            f"(such as /run/user/{os.getuid()}), or have an administrator remove {path}")  # fmt: skip


def ensure_socket_dir(path: str) -> str:
    """Create the socket directory 0700, or refuse one that is not safely ours (failed.socket_dir)."""
    if not check_socket_dir(path):
        _make_dir(path)
        check_socket_dir(path)
    return path


NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def create_temporary(dest: str) -> tuple[int, str]:
    """A new, empty 0600 file beside `dest` under a random name, open for writing: (fd, path).

    `O_EXCL | O_NOFOLLOW`: it is created here and now, never reached through a file or symbolic link someone
    left at the name, and nobody can guess the name beforehand (docs/security.md, "Files the daemon writes")."""
    import secrets

    while True:
        tmp = f"{dest}.tmp-{secrets.token_hex(8)}"
        try:
            return os.open(tmp, NEW_FILE, 0o600), tmp
        except FileExistsError:  # 64 random bits taken already: someone is guessing; draw again
            continue


def same_file(fd: int, path: str) -> bool:
    """Whether `path` (not followed) still names the file open at `fd`."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def write_private(path: str, data: bytes) -> None:
    """Write a 0600 file atomically (a new random temporary name, fsync, rename)."""
    check_not_link(path)
    fd, tmp = create_temporary(path)
    try:
        try:
            view = memoryview(data)
            while view:  # a large file (an export rewritten by purge) may take more than one write
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path))


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def token() -> str:
    """The credential from `HIVEMEM_TOKEN` (`@owner` means the owner key)."""
    return os.environ.get("HIVEMEM_TOKEN", "")


def daemon_env() -> dict[str, str]:
    """The environment a daemon is started with: ours, less the token."""
    env = dict(os.environ)
    env.pop("HIVEMEM_TOKEN", None)
    return env


def never_a_project() -> frozenset[str]:
    """Directories that name no project outside git (docs/verbs.md): the root, the home and the temporary directory."""
    import tempfile

    return frozenset(os.path.realpath(d) for d in (os.sep, os.path.expanduser("~"), tempfile.gettempdir()))


def harness_home(harness: str) -> str:
    """Where a harness keeps its own files: `$CODEX_HOME` (else `~/.codex`) for Codex, `$CLAUDE_CONFIG_DIR` (else
    `~/.claude`) for Claude Code."""
    var, default = {"codex": ("CODEX_HOME", ".codex"), "claude-code": ("CLAUDE_CONFIG_DIR", ".claude")}[harness]
    value = os.environ.get(var)
    return value if value and os.path.isabs(value) else os.path.join(os.path.expanduser("~"), default)
