"""ADAPTER: harness hooks for Claude Code and Codex (SPEC 11.3): read-only recall that fails open."""
