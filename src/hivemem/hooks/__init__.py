"""ADAPTER: harness hooks for Claude Code and Codex (docs/hooks.md): read-only recall that fails open."""
