"""The SQLite backend: every SQL statement and every SQLite specific (pragmas, FTS5, `instr`,
`sqlite_sequence`, `VACUUM INTO`, backup scrubbing) lives in this package."""
