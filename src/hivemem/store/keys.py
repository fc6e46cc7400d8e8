"""The owner key file and fresh token secrets (docs/security.md): files and randomness, the same for every backend."""

from __future__ import annotations

import base64
import os
import secrets


def new_secret() -> str:
    """43 characters of base64url: 32 random bytes."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def ensure_owner_key(path: str) -> str:
    """Read the owner key, creating the 0600 file at first start."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return read_key(path)
    key = f"hm1.owner.{new_secret()}"
    try:
        os.write(fd, key.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def read_key(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
