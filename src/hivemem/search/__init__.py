"""Search: the full-text list (fts), and later the vector list and their fusion."""
