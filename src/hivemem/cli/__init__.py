"""ADAPTER: the `hivemem` command, generated from the manifest. Its entry point is cli/main.py."""
