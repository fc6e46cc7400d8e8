"""Files the daemon writes beside the store or where the owner says (docs/schema.md): exports and backups.

Each is written to a new 0600 file under a random temporary name in its destination's directory (created with
`O_EXCL | O_NOFOLLOW`, so never through a file or link already there), fsynced, checked, then published with a
hard link, which never replaces an existing path, and the directory is fsynced (docs/security.md).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator

from hivemem.errors import Conflict, Denied, InvalidParams
from hivemem.paths import check_not_link, create_temporary, ensure_dir, fsync_dir, same_file


def check_destination(dest: str) -> None:
    """Refuse a relative path, a missing or symlinked directory, and an existing or symlinked destination."""
    if not os.path.isabs(dest):
        raise InvalidParams("path", f"{dest} is not an absolute path", param="path")
    directory = os.path.dirname(dest)
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        raise InvalidParams("path", f"{directory} does not exist", param="path", path=directory) from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise Denied("path", f"{directory} is not a directory (or is a symbolic link)", path=directory)
    if others_can_change(st):
        raise Denied("path", f"{directory} can be changed by another user, who could swap the file while it is "
                     "written", path=directory,
                     fix="write it into a folder of yours that only you can change")  # fmt: skip
    if check_not_link(dest):
        raise exists(dest)


def others_can_change(st: os.stat_result) -> bool:
    """Whether another user may rename or replace the entries of this directory (its owner, or a write right of
    another group or of everyone without the sticky bit): they could swap a temporary file for one of theirs
    between its creation and `VACUUM INTO`, and read the copy (docs/security.md)."""
    if st.st_uid not in (os.getuid(), 0):
        return True
    if st.st_mode & stat.S_ISVTX:
        return False
    return bool(st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != os.getgid()))


def exists(dest: str) -> Conflict:
    return Conflict("path_exists", f"{dest} exists; hivemem never replaces it", path=dest,
                    fix="choose a new path, or move the old file away")  # fmt: skip


def default_dir(data_dir: str, name: str) -> str:
    """`exports/` or `backups/` beside the store, created 0700."""
    return ensure_dir(os.path.join(data_dir, name))


def default_export(data_dir: str) -> str:
    """`exports/hivemem-export-<time>-<random>.json` beside the store: a name the daemon picks, which nobody
    can have prepared."""
    import secrets
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
    name = f"hivemem-export-{stamp}-{secrets.token_hex(4)}.json"
    return os.path.join(default_dir(data_dir, "exports"), name)


@contextlib.contextmanager
def new_database(dest: str) -> Iterator[str]:
    """A new, empty 0600 file beside `dest` for SQLite to write a copy into (`VACUUM INTO` follows symbolic links
    and writes into an empty file it finds): created here with `O_EXCL | O_NOFOLLOW` under a random name, and
    checked after the block to be that same file, fsynced. Removed if the block fails."""
    fd, tmp = create_temporary(dest)
    try:
        yield tmp
        if not same_file(fd, tmp):
            raise Denied("path", f"{tmp} was replaced while the copy was written", path=tmp)
        os.fchmod(fd, 0o600)
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    finally:
        os.close(fd)


def publish(tmp: str, dest: str) -> None:
    """Give the fsynced temporary file its name without replacing anything, then fsync the directory."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise exists(dest) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(os.path.dirname(dest))


class Output:
    """A UTF-8 text sink that counts the bytes written."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb", buffering=1 << 20)
        self.size = 0

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._file.write(data)
        self.size += len(data)

    def finish(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


@contextlib.contextmanager
def private_output(dest: str) -> Iterator[Output]:
    """Write `dest` as a new 0600 file: published only if the block completes, never half-written."""
    check_destination(dest)
    fd, tmp = create_temporary(dest)
    out = Output(fd)
    try:
        yield out
        out.finish()
        publish(tmp, dest)
    except BaseException:
        out.discard()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
