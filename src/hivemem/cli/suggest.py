"""Did you mean: the nearest command or flag to a mistyped one (difflib), for usage errors only.

Imported when a command line is already wrong, so it costs the warm path nothing.
"""

from __future__ import annotations

import difflib

CUTOFF = 0.6  # difflib's default: `contnet`→`content`, `memroy`→`memory`; `x`→nothing


def command(words: list[str], names: list[str]) -> str | None:
    """The command of `names` (every command as typed after `hivemem`) meant by `words`: `export` → `store
    export`, `memroy add` → `memory add`, `doctr` → `doctor`; None when nothing is near."""
    # a subcommand typed without its group
    bare = list(dict.fromkeys(n for n in names if " " in n and n.split()[-1] == words[0]))
    if len(bare) == 1:
        return bare[0]
    near = difflib.get_close_matches(" ".join(words[:2]), names, n=1, cutoff=CUTOFF)
    if near:
        return near[0]
    firsts = list(dict.fromkeys(n.split()[0] for n in names))
    near = difflib.get_close_matches(words[0], firsts, n=1, cutoff=CUTOFF)
    return near[0] if near else None


def in_group(group: str, word: str, known: list[str], names: list[str]) -> str | None:
    """`hivemem GROUP WORD` where WORD is none of the group's `known` commands: the nearest of them, or the one
    command of another group that ends in WORD (`memory export` → `store export`)."""
    near = difflib.get_close_matches(word, known, n=1, cutoff=CUTOFF)
    if near:
        return f"{group} {near[0]}"
    elsewhere = [n for n in names if " " in n and n.split()[-1] == word]
    return elsewhere[0] if len(elsewhere) == 1 else None


def flag(typed: str, flags: list[str]) -> str | None:
    """The nearest of a command's flags to a mistyped one (`--contnet` → `--content`)."""
    near = difflib.get_close_matches(typed, flags, n=1, cutoff=CUTOFF)
    return near[0] if near else None
