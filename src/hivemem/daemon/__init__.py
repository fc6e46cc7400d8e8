"""ADAPTER: the daemon that owns the store (the only adapter that imports it)."""
