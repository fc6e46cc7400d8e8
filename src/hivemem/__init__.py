"""hivemem: a shared, local-first memory store for AI agents."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any


__version__ = "0.1.0"
__all__ = ["Store", "errors", "open_store"]


def __getattr__(name: str) -> Any:
    """Export the store lazily so that importing hivemem.cli never loads the SQLite binding."""
    if name in ("Store", "open_store"):
        from hivemem import store

        return getattr(store, name)
    if name == "errors":
        from hivemem import errors

        return errors
    raise AttributeError(name)
