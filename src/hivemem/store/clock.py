"""Timestamps as every store writes them (docs/verbs.md): RFC 3339 UTC with milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> str:
    """RFC 3339 UTC with milliseconds: `2026-11-09T10:00:00.000Z`."""
    return format_time(datetime.now(UTC))


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
