"""One error tree: every error carries its wire code and the CLI exit code (docs/cli.md)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any


class HivememError(Exception):
    """Base of every hivemem error; `code` is `<class>.<detail>`."""

    prefix = "failed"
    exit_code = 1

    def __init__(self, detail: str, message: str, **data: object) -> None:
        super().__init__(message)
        self.code = f"{self.prefix}.{detail}"
        self.message = message
        self.data: dict[str, Any] = data

    def to_wire(self) -> dict[str, Any]:
        """The `{code, message, data}` object of the wire protocol."""
        return {"code": self.code, "message": self.message, "data": self.data}


class Failed(HivememError):
    prefix, exit_code = "failed", 1


class InvalidParams(HivememError):
    prefix, exit_code = "invalid_params", 2


class NotFound(HivememError):
    prefix, exit_code = "not_found", 3


class Denied(HivememError):
    prefix, exit_code = "denied", 4


class Conflict(HivememError):
    prefix, exit_code = "conflict", 5


class Unavailable(HivememError):
    prefix, exit_code = "unavailable", 6


class Unsupported(HivememError):
    prefix, exit_code = "unsupported", 10


CLASSES: dict[str, type[HivememError]] = {
    cls.prefix: cls for cls in (Failed, InvalidParams, NotFound, Denied, Conflict, Unavailable, Unsupported)
}


def from_wire(error: dict[str, Any]) -> HivememError:
    """Rebuild an error received over the wire, keeping its exact code."""
    code = str(error.get("code", "failed.unknown"))
    prefix, _, detail = code.partition(".")
    cls = CLASSES.get(prefix, Failed)
    data = error.get("data")
    err = cls(detail or "unknown", str(error.get("message", code)), **(data if isinstance(data, dict) else {}))
    err.code = code
    return err
