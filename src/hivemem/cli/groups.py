"""Command groups: `hivemem memory`, `hivemem memory --help` and friends list the group's commands."""

from __future__ import annotations

from hivemem.cli import output
from hivemem.cli.wording import first_sentence
from hivemem.errors import InvalidParams
from hivemem.manifest import VERBS

# Commands of a group that are not verbs: `config get|set` work on the file, never on the daemon.
EXTRA = {
    "config": {
        "get": "Show the settings in force (the file over the defaults); --key K shows one.",
        "set": "Validate and write one setting (owner); a running daemon reloads it.",
    },
    "store": {
        "init": "Create the store (a team store's schema when store.url is set) and the owner key, shown once.",
        "restore": "Replace the store with a validated backup while no daemon runs (owner).",
    },
    "team": {
        "join": "Keep your client token of the team store (team.url) in hivemem's credential store, 0600.",
    },
}
HELP = ("--help", "-h", "help")


def commands(group: str) -> dict[str, str]:
    """The group's commands and their one-line summaries, in manifest order."""
    found = dict(EXTRA.get(group, {}))
    for verb in VERBS:
        prefix, _, name = verb.cli_name.rpartition(" ")
        if prefix == group:
            found[name] = first_sentence(verb.summary)
    return found


def grouped() -> list[str]:
    """Every command of every group as typed after `hivemem` (`memory add`, `store restore`)."""
    names = [v.cli_name for v in VERBS if " " in v.cli_name]
    return names + [f"{group} {name}" for group, extra in EXTRA.items() for name in extra]


def is_group(word: str) -> bool:
    return bool(commands(word))


def usage(group: str) -> str:
    return f"usage: hivemem {group} {{{','.join(commands(group))}}} [--param value ...] [--json]"


def text(group: str) -> str:
    listed = commands(group)
    width = max(len(name) for name in listed)
    lines = [usage(group), "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, summary in listed.items()]
    lines += ["", f"`hivemem {group} <command> --help` lists a command's params."]
    return "\n".join(lines)


def run(group: str, args: list[str]) -> int:
    """`hivemem GROUP` or `hivemem GROUP --help`: the list; an unknown command: a usage error naming them."""
    if not args or args[0] in HELP:
        output.line(text(group))
        return 0
    if (group, args[0]) == ("store", "init"):
        from hivemem.cli import store_init

        return store_init.run(args[1:])
    if (group, args[0]) == ("team", "join"):
        from hivemem.cli import team

        return team.join(args[1:])
    if (group, args[0]) == ("store", "restore"):
        from hivemem.cli import restore

        return restore.run(args[1:])
    from hivemem.cli import suggest

    listed = list(commands(group))
    near = suggest.in_group(group, args[0], listed, grouped())
    hint = f"did you mean 'hivemem {near}'? " if near else ""
    error = InvalidParams("usage", f"unknown command 'hivemem {group} {args[0]}'; {hint}{group} commands: "
                          f"{', '.join(listed)}", usage=usage(group))  # fmt: skip
    return output.error(error, "--json" in args)
