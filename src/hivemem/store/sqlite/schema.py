"""The schema: canonical tables as docs/schema.md, the search index of version 2 and the time indexes of version 3."""

from __future__ import annotations

APPLICATION_ID = 1213615437  # "HVMM"
VERSION = 3
PAGE_SIZE = 16384  # ~1 KB rows stay on their page in index b-trees, and 2 KB rows pack densely (see D38)
# The capture-key index holds a 32-character prefix (lookups match the prefix, then the whole key on the row):
# indexing the whole key would store every memory's normalized text a third time (docs/decisions.md D38).

TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  harness TEXT NOT NULL, harness_session TEXT,
  parent INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
  relation TEXT CHECK (relation IN ('continue','fork','subagent')),
  cwd TEXT, principal TEXT NOT NULL, label TEXT,
  started TEXT NOT NULL, ended TEXT);
CREATE UNIQUE INDEX sessions_harness ON sessions(harness, harness_session) WHERE harness_session IS NOT NULL;
CREATE INDEX sessions_parent ON sessions(parent);

CREATE TABLE memories (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  space TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('note','fact','decision','procedure','preference','convention','task','lesson')),
  title TEXT NOT NULL DEFAULT '',
  content TEXT NOT NULL,
  content_sha256 BLOB NOT NULL,
  capture_key TEXT NOT NULL,
  tags TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','draft','archived')),
  source TEXT, provenance TEXT,
  confidence REAL NOT NULL DEFAULT 1.0 CHECK (confidence BETWEEN 0.0 AND 1.0),
  confidence_state TEXT CHECK (confidence_state IN ('observed','inferred','user_confirmed','needs_review','deprecated')),
  review_after TEXT, expires_at TEXT,
  revision INTEGER NOT NULL DEFAULT 1,
  principal TEXT NOT NULL, label TEXT, updated_by TEXT NOT NULL, updated_label TEXT,
  session INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
  created TEXT NOT NULL, updated TEXT NOT NULL, deleted TEXT);
CREATE UNIQUE INDEX memories_live_content ON memories(space, content_sha256) WHERE deleted IS NULL;
CREATE INDEX memories_space ON memories(space, id) WHERE deleted IS NULL;
CREATE INDEX memories_capture_key ON memories(space, substr(capture_key, 1, 32), id) WHERE deleted IS NULL;
CREATE INDEX memories_session ON memories(session) WHERE session IS NOT NULL;
CREATE INDEX memories_review ON memories(review_after) WHERE deleted IS NULL AND review_after IS NOT NULL;

CREATE TABLE memory_versions (
  memory INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
  revision INTEGER NOT NULL,
  action TEXT NOT NULL,
  kind TEXT NOT NULL, title TEXT NOT NULL, content TEXT NOT NULL, tags TEXT NOT NULL,
  status TEXT NOT NULL, meta TEXT NOT NULL,
  principal TEXT NOT NULL, label TEXT, ts TEXT NOT NULL,
  PRIMARY KEY (memory, revision)) WITHOUT ROWID;

CREATE TABLE memory_relations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  source_memory INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
  target_memory INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
  relation TEXT NOT NULL CHECK (relation IN ('supersedes','contradicts','related','duplicates','derived_from')),
  reason TEXT, principal TEXT NOT NULL, label TEXT, created TEXT NOT NULL,
  UNIQUE (source_memory, target_memory, relation));

CREATE TABLE memory_vectors (
  memory INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
  model TEXT NOT NULL, embedding BLOB NOT NULL);

CREATE TABLE clients (
  name TEXT PRIMARY KEY, principal TEXT NOT NULL UNIQUE, grants TEXT NOT NULL,
  token_hash BLOB NOT NULL, created TEXT NOT NULL, expires TEXT) WITHOUT ROWID;

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL, type TEXT NOT NULL,
  principal TEXT NOT NULL, label TEXT, space TEXT, memory INTEGER, session INTEGER,
  revision INTEGER, data TEXT NOT NULL DEFAULT '{}',
  chain BLOB NOT NULL);
CREATE INDEX events_memory ON events(memory) WHERE memory IS NOT NULL;
"""

# Version 1: external-content FTS5 over `memories` (D38), English word tokens.
FTS_V1 = """
CREATE VIRTUAL TABLE memory_fts USING fts5(title, content, tags,
  content = 'memories', content_rowid = 'id',
  tokenize = 'porter unicode61 remove_diacritics 2');
INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1);
"""

# Version 2 (docs/decisions.md D60, D61): the index reads the live, active rows through a view that hands
# FTS5 each memory's space as the locale of its text. The `hivemem` tokenizer (store/fts5.py) keeps the
# English tokens of version 1, cuts CJK runs into bigrams, and colocates one space token with each
# column's first token, so MATCH can keep one space without changing a column size or a bm25 score.
FTS_V2 = """
CREATE VIEW memory_fts_source(id, title, content, tags) AS
  SELECT id, fts5_locale(space, title), fts5_locale(space, content), fts5_locale(space, tags)
  FROM memories WHERE deleted IS NULL AND status = 'active';
CREATE VIRTUAL TABLE memory_fts USING fts5(title, content, tags,
  content = 'memory_fts_source', content_rowid = 'id', locale = 1,
  tokenize = 'hivemem porter unicode61 remove_diacritics 2');
INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1);
"""

# Version 3 (docs/decisions.md D292): the live rows by `updated` and by `created`, so a search or list with a
# time window reads the window's entries instead of every row (search.id_range, the filter's own range).
TIME_INDEXES = """
CREATE INDEX memories_updated ON memories(updated) WHERE deleted IS NULL;
CREATE INDEX memories_created ON memories(created) WHERE deleted IS NULL;
"""

V1 = TABLES + FTS_V1
V2 = TABLES + FTS_V2
V3 = TABLES + FTS_V2 + TIME_INDEXES
CURRENT = V3  # what a new store is created with
