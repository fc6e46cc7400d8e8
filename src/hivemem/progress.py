"""Progress of long work, for whoever asked to hear it (docs/cli.md: long work shows progress on a terminal).

Work calls `report(stage, done, total)` as it goes; it costs one thread-local lookup when nobody listens. The
daemon sets a listener around a request that asked for progress (D114) and sends what it hears as progress
frames before the reply. Any verb can report: store code never knows whether, or to whom, it is reporting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

Listener = Callable[[str, int, int], None]  # (stage, done, total)
EVERY = 1000  # items between two reports of item-by-item work

_local = threading.local()
Args = ParamSpec("Args")
Result = TypeVar("Result")


@contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """Reports made on this thread inside the block go to `listener` (none: they go nowhere)."""
    before = getattr(_local, "listener", None)
    _local.listener = listener
    try:
        yield
    finally:
        _local.listener = before


def run(listener: Listener | None, work: Callable[Args, Result], *args: Args.args, **kw: Args.kwargs) -> Result:
    """`work(*args)` with `listener` hearing its reports (for a call handed to another thread)."""
    with listening(listener):
        return work(*args, **kw)


def report(stage: str, done: int, total: int) -> None:
    """`done` of `total` units of the stage named are done."""
    listener: Listener | None = getattr(_local, "listener", None)
    if listener is not None:
        listener(stage, done, total)


def every(stage: str, done: int, total: int) -> None:
    """`report` every EVERY items, and at the last one."""
    if done % EVERY == 0 or done == total:
        report(stage, done, total)
