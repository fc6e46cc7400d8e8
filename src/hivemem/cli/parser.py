"""argparse for the generated commands: usage errors as hivemem errors, one parser per verb."""

from __future__ import annotations

import argparse

from hivemem.cli.params import flag, help_text
from hivemem.errors import InvalidParams
from hivemem.manifest import NOT_RUN, VERBS, Verb

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse that raises a usage error instead of exiting, so --json can report it."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            flags = [a for a in message.split(":", 1)[1].split() if a.startswith("--")]
            if flags:  # an unknown param is invalid_params.unknown, whatever the surface (docs/protocol.md)
                typed = flags[0].split("=", 1)[0]
                name = typed[2:].replace("-", "_")
                raise InvalidParams("unknown", f"{self.prog} has no {typed}{self._did_you_mean(typed)}", param=name)
        raise InvalidParams("usage", message, usage=self.format_usage().strip())

    def _did_you_mean(self, typed: str) -> str:
        from hivemem.cli import suggest

        flags = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        near = suggest.flag(typed, flags)
        return f"; did you mean {near}?" if near else ""


def find_verb(argv: list[str]) -> tuple[Verb | None, list[str]]:
    """The verb whose `cli_name` `argv` starts with (`memory add`, `whoami`, `stop`) and the remaining args."""
    for verb in VERBS:
        words = verb.cli_name.split()
        if argv[: len(words)] == words:
            return verb, argv[len(words) :]
    return None, argv


def examples(verb: Verb) -> str:
    """The verb's examples for --help, without the docs test's marks (docs/decisions.md D325)."""
    return "\n".join(line for e in verb.examples for line in e.splitlines() if not line.startswith(NOT_RUN))


def verb_parser(verb: Verb, prog: str) -> Parser:
    from hivemem.cli.wording import typed

    parser = Parser(prog=prog, description=typed(verb.summary), epilog=examples(verb) or None)
    parser.add_argument("--json", action="store_true", help="print the result object as JSON")
    for p in verb.params:
        if p.by_client:
            continue
        kw: dict[str, Any] = {"dest": p.name, "help": help_text(p)}
        if p.type == "boolean":
            kw.update(nargs="?", const="true", metavar="true|false")
        elif p.type == "array":
            kw.update(action="append")  # `--spaces a --spaces b` is both (docs/cli.md)
        parser.add_argument(f"--{flag(p.name)}", **kw)
    return parser


def attach_values(verb: Verb, args: list[str]) -> list[str]:
    """`--query -zebra` → `--query=-zebra`: a value may start with a dash (argparse would take it for a flag)."""
    takes_value = {f"--{flag(p.name)}" for p in verb.params if p.type != "boolean"}
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in takes_value and i + 1 < len(args) and args[i + 1].startswith("-") and args[i + 1] != "-":
            out.append(f"{args[i]}={args[i + 1]}")
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out
