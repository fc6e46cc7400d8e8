"""Secrets already stored: live memories scanned with the write path's detector (doctor's `secrets.stored`).

Rows written before a rule existed, or by an older hivemem, can hold a secret; this finds them by id and
kind, never by value, newest first and within a time budget so a large store cannot hang `doctor`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hivemem import secrets
from hivemem.store.connection import Connection
from hivemem.store.sqlite.db import scalar

FIELDS = ("content", "title", "tags", "source", "provenance")
Progress = Callable[[int, int, bool], None]  # (scanned, total, final)
EVERY = 500


@dataclass
class Report:
    """How many live memories there are, how many were scanned, and what was found: (id, field, kind)."""

    total: int
    scanned: int = 0
    found: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.scanned == self.total


def _first_secret(values: list[str | None]) -> tuple[str, str] | None:
    """(field, kind) of the first field holding a secret."""
    for name, value in zip(FIELDS, values, strict=True):
        kind = secrets.find(value) if value else None
        if kind is not None:
            return name, kind
    return None


def scan_stored(conn: Connection, budget_s: float, progress: Progress | None = None) -> Report:
    """Scan live memories, newest first, until done or `budget_s` seconds have passed."""
    report = Report(int(scalar(conn, "SELECT COUNT(*) FROM memories WHERE deleted IS NULL") or 0))
    deadline = time.monotonic() + budget_s
    rows = conn.execute(f"SELECT id, {', '.join(FIELDS)} FROM memories WHERE deleted IS NULL ORDER BY id DESC")
    for memory, *values in rows:
        hit = _first_secret(values)
        if hit is not None:
            report.found.append((f"m{memory}", *hit))
        report.scanned += 1
        if progress is not None and report.scanned % EVERY == 0:
            progress(report.scanned, report.total, False)
        if time.monotonic() > deadline:
            break
    if progress is not None and report.scanned >= EVERY:
        progress(report.scanned, report.total, True)
    return report
