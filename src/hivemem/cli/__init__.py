"""ADAPTER: the `hivemem` command, generated from the manifest."""

from hivemem.cli.main import main

__all__ = ["main"]
