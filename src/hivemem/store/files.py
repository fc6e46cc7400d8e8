"""Files the daemon writes beside the store or where the owner says (SPEC 5.2): exports and backups.

Each is written to a 0600 temporary name in its destination's directory, fsynced, checked, then published
with a hard link, which never replaces an existing path, and the directory is fsynced.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator

from hivemem.errors import Conflict, Denied, InvalidParams
from hivemem.paths import check_not_link, ensure_dir, fsync_dir


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
    if check_not_link(dest):
        raise exists(dest)


def exists(dest: str) -> Conflict:
    return Conflict("path_exists", f"{dest} exists; hivemem never replaces it", path=dest,
                    fix="choose a new path, or move the old file away")  # fmt: skip


def default_dir(data_dir: str, name: str) -> str:
    """`exports/` or `backups/` beside the store, created 0700."""
    return ensure_dir(os.path.join(data_dir, name))


def default_export(data_dir: str) -> str:
    """`exports/hivemem-export-<time>.json` beside the store."""
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
    return os.path.join(default_dir(data_dir, "exports"), f"hivemem-export-{stamp}.json")


def temporary(dest: str) -> str:
    return f"{dest}.tmp-{os.getpid()}"


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


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    tmp = temporary(dest)
    out = Output(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    try:
        yield out
        out.finish()
        publish(tmp, dest)
    except BaseException:
        out.discard()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
