"""A launcher that runs the real daemon and makes it die between the two steps of a move across the personal and
the team store: right after the copy landed in the target store, before the source is deleted (docs/team.md, D397).

`python crashmove.py serve` runs `hivemem.daemon.main.serve()`, the daemon's real code path, with the move's second
step (`hivemem.daemon.crossmove.delete_source`) replaced by `os._exit(CRASHED)`: the process ends there with no
clean-up at all, as a daemon killed at that moment would.
"""

from __future__ import annotations

import os
import sys
from typing import Any

CRASHED = 86


def main() -> int:
    from hivemem.daemon import crossmove
    from hivemem.daemon.main import serve

    async def crash(*_: Any, **__: Any) -> None:
        os._exit(CRASHED)

    crossmove.delete_source = crash
    return serve()


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    sys.exit(main())
