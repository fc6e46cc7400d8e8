"""The team store's runtime role: exactly the rights the verbs need, granted by `store init --runtime-role`, and
the check that it holds no more (`store.role_rights`, docs/decisions.md D250).

Every machine of a team holds the runtime role's credential, so it must not be able to do what no verb does: change
the schema, the owner record or any other row of `meta`, an event or a written-out version, or who wrote a memory.
What the verbs must still do beyond plain inserts (purge's erasure, a session's purge, the removal of old
tombstones and versions, keeping a superseded version's text, the principal counter, the ids after an import and
the table locks of import and export) runs in functions the schema's owner owns (`SECURITY DEFINER`, with a fixed
`search_path`), each doing that one thing; the runtime role may execute them and nothing else of the kind.
"""

from __future__ import annotations

from typing import Any

from hivemem.errors import InvalidParams
from hivemem.store.postgres.conn import Connection

# table: (table-level rights, the columns the role may UPDATE when it may not update the whole row)
RIGHTS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "meta": (frozenset({"SELECT"}), ()),
    "sessions": (frozenset({"SELECT", "INSERT"}), ("ended",)),
    "memories": (frozenset({"SELECT", "INSERT"}),
                 ("space", "kind", "title", "content", "content_sha256", "capture_key", "tags", "status", "source",
                  "provenance", "confidence", "confidence_state", "review_after", "expires_at", "revision",
                  "updated_by", "updated_label", "updated", "deleted", "search")),
    "memory_versions": (frozenset({"SELECT", "INSERT"}), ()),
    "memory_relations": (frozenset({"SELECT", "INSERT", "DELETE"}), ()),
    "memory_vectors": (frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"}), ()),
    "clients": (frozenset({"SELECT", "INSERT", "DELETE"}), ()),
    "events": (frozenset({"SELECT", "INSERT"}), ()),
}  # fmt: skip
SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")
TABLE_RIGHTS = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
SEQUENCES = ("memories_id_seq", "sessions_id_seq", "memory_relations_id_seq")  # USAGE and SELECT: ids, the max id

# The functions that do, as the schema's owner, what the runtime role may not do itself. {schema} is the store's.
FUNCTIONS: dict[str, str] = {
    "hivemem_purge_memory(bigint)": """
CREATE OR REPLACE FUNCTION hivemem_purge_memory(p_memory BIGINT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE n BIGINT;
BEGIN
  DELETE FROM memories WHERE id = p_memory;  -- versions, relations and the vector go with it (ON DELETE CASCADE)
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$""",
    "hivemem_remove_tombstones(text)": """
CREATE OR REPLACE FUNCTION hivemem_remove_tombstones(p_cutoff TEXT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE n BIGINT;
BEGIN
  DELETE FROM memories WHERE deleted IS NOT NULL AND deleted < p_cutoff;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$""",
    "hivemem_purge_session(bigint)": """
CREATE OR REPLACE FUNCTION hivemem_purge_session(p_session BIGINT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE n BIGINT;
BEGIN
  DELETE FROM sessions WHERE id = p_session;  -- children and memories lose the reference (ON DELETE SET NULL)
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$""",
    "hivemem_keep_version(text,bigint)": """
CREATE OR REPLACE FUNCTION hivemem_keep_version(p_content TEXT, p_memory BIGINT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE n BIGINT;
BEGIN
  -- the text of the version a change supersedes, stored once: only a version still holding none ('') and older
  -- than the memory's revision, so a written-out version is never rewritten
  UPDATE memory_versions SET content = p_content
   WHERE memory = p_memory AND content = ''
     AND revision < (SELECT revision FROM memories WHERE id = p_memory);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$""",
    "hivemem_trim_versions(bigint,bigint)": """
CREATE OR REPLACE FUNCTION hivemem_trim_versions(p_memory BIGINT, p_upto BIGINT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE n BIGINT;
BEGIN
  -- versions past memory.max_versions (each machine's config, 1 or more): never the newest
  DELETE FROM memory_versions WHERE memory = p_memory AND revision <= p_upto
     AND revision < (SELECT max(revision) FROM memory_versions WHERE memory = p_memory);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$""",
    "hivemem_next_principal(bigint)": """
CREATE OR REPLACE FUNCTION hivemem_next_principal(p_next BIGINT) RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE n BIGINT;
BEGIN
  -- the client counter only moves forward, so a removed principal's number is never given again
  UPDATE meta SET value = GREATEST(value::BIGINT, p_next)::TEXT WHERE key = 'next_principal';
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$""",
    "hivemem_memories_past_ids()": """
CREATE OR REPLACE FUNCTION hivemem_memories_past_ids() RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE top BIGINT;
BEGIN
  -- after an import that gave ids: the sequence moves past them, never back
  SELECT max(id) INTO top FROM memories;
  IF top IS NOT NULL AND top > (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM memories_id_seq) THEN
    PERFORM setval(pg_get_serial_sequence('memories', 'id'), top);
  END IF;
  RETURN 1;
END $$""",
    "hivemem_lock_memories()": """
CREATE OR REPLACE FUNCTION hivemem_lock_memories() RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
BEGIN
  LOCK TABLE memories IN EXCLUSIVE MODE;  -- held to the caller's commit: an import plans ids, reads go on
  RETURN 1;
END $$""",
    "hivemem_lock_snapshot()": """
CREATE OR REPLACE FUNCTION hivemem_lock_snapshot() RETURNS BIGINT
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
BEGIN
  LOCK TABLE memories, memory_relations, sessions IN SHARE MODE;  -- an export reads one state while writes wait
  RETURN 1;
END $$""",
}
PLAIN_FUNCTIONS = ("instr(text,text)",)  # no rights of their own (SECURITY INVOKER)


def _schema(conn: Connection) -> str:
    return str(conn.run("SELECT current_schema()")[0][0])


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_functions(conn: Connection) -> None:
    """Schema version 3: the functions, executable by nobody until `store init --runtime-role` grants them (a
    function is executable by every role unless revoked)."""
    schema = _ident(_schema(conn))
    for signature, text in FUNCTIONS.items():
        conn.run(text.format(schema=schema))
        conn.run(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
    for signature in PLAIN_FUNCTIONS:
        conn.run(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")


def recorded(conn: Connection) -> str | None:
    """The runtime role `store init --runtime-role` recorded, if any."""
    rows = conn.run("SELECT value FROM meta WHERE key = 'runtime_role'")
    return str(rows[0][0]) if rows else None


def grant(conn: Connection, role: str) -> None:
    """Inside the caller's transaction, as the schema's owner: revoke everything from `role` (and from PUBLIC) on
    the store's schema, tables, sequences and functions, then grant exactly RIGHTS, and record the role."""
    _fit(conn, role)
    schema, who = _ident(_schema(conn)), _ident(role)
    _revoke(conn, schema, who)
    conn.run(f"GRANT USAGE ON SCHEMA {schema} TO {who}")
    for table, (rights, columns) in RIGHTS.items():
        conn.run(f"GRANT {', '.join(sorted(rights))} ON {table} TO {who}")
        if columns:
            conn.run(f"GRANT UPDATE ({', '.join(columns)}) ON {table} TO {who}")
    for sequence in SEQUENCES:
        conn.run(f"GRANT USAGE, SELECT ON SEQUENCE {sequence} TO {who}")
    for signature in (*FUNCTIONS, *PLAIN_FUNCTIONS):
        conn.run(f"GRANT EXECUTE ON FUNCTION {signature} TO {who}")
    conn.run("INSERT INTO meta(key, value) VALUES ('runtime_role', %s) ON CONFLICT (key) DO UPDATE SET value = %s",
             (role, role))  # fmt: skip


def _fit(conn: Connection, role: str) -> None:
    """invalid_params.runtime_role unless `role` exists and is neither a superuser nor the schema's owner."""
    found = conn.run("SELECT rolsuper, pg_has_role(%s, (SELECT relowner FROM pg_class WHERE oid = 'meta'::regclass), "
                     "'MEMBER') FROM pg_roles WHERE rolname = %s", (role, role))  # fmt: skip
    if not found:
        raise InvalidParams("runtime_role", f"no role named {role} exists on the server",
                            fix=f"create it first: CREATE ROLE {_ident(role)} LOGIN (docs/team.md)")  # fmt: skip
    if found[0][0] or found[0][1]:
        raise InvalidParams("runtime_role", f"{role} is a superuser or owns the store's schema: the runtime role must "
                            "be a role of its own with no more than the verbs need",
                            fix="create a separate role for the daemons (docs/team.md)")  # fmt: skip


def _revoke(conn: Connection, schema: str, who: str) -> None:
    """Everything `who` holds on the schema and its objects, and what PUBLIC holds on hivemem's own objects (an
    extension's functions sharing the schema keep theirs), and the default privileges the owner gave `who`."""
    for kind in ("TABLES", "SEQUENCES", "FUNCTIONS"):
        conn.run(f"REVOKE ALL ON ALL {kind} IN SCHEMA {schema} FROM {who}")
        conn.run(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} REVOKE ALL ON {kind} FROM {who}")
    for table in RIGHTS:
        conn.run(f"REVOKE ALL ON {table} FROM PUBLIC")
    for sequence in SEQUENCES:
        conn.run(f"REVOKE ALL ON SEQUENCE {sequence} FROM PUBLIC")
    for signature in (*FUNCTIONS, *PLAIN_FUNCTIONS):
        conn.run(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
    conn.run(f"REVOKE ALL ON SCHEMA {schema} FROM {who}")
    conn.run(f"REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC")


def excess(conn: Connection, role: str) -> list[str]:
    """What `role` may do beyond RIGHTS on the store's schema, one sentence each (empty: exactly what it needs)."""
    out: list[str] = []
    attrs = conn.run("SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = %s", (role,))
    if not attrs:
        return [f"the recorded runtime role {role} does not exist"]
    for flag, name in zip(attrs[0], ("SUPERUSER", "BYPASSRLS", "CREATEROLE"), strict=True):
        if flag:
            out.append(f"{role} has {name}")
    if not attrs[0][0]:  # a superuser is a member of every role; said once above
        # files and programs on the server run as its operating-system user, which can rewrite any table
        held = conn.run("SELECT r FROM unnest(%s::text[]) AS r WHERE pg_has_role(%s, r, 'MEMBER') ORDER BY r",
                        (list(SERVER_ROLES), role))  # fmt: skip
        out += [f"{role} is a member of {r[0]}" for r in held]
    schema = _schema(conn)
    owner = conn.run("SELECT pg_has_role(%s, relowner, 'USAGE') FROM pg_class WHERE oid = 'meta'::regclass", (role,))
    if owner and owner[0][0]:
        out.append(f"{role} owns the store's tables (or is a member of their owner)")
    if conn.run("SELECT has_schema_privilege(%s, %s, 'CREATE')", (role, schema))[0][0]:
        out.append(f"{role} may CREATE in schema {schema}")
    tables = [str(r[0]) for r in conn.run("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]
    for table in sorted(tables):
        out += _table_excess(conn, role, schema, table)
    for (sequence,) in conn.run("SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)):
        qualified = f"{_ident(schema)}.{_ident(sequence)}"
        if conn.run("SELECT has_sequence_privilege(%s, %s, 'UPDATE')", (role, qualified))[0][0]:
            out.append(f"{role} may UPDATE sequence {sequence} (setval)")
    return out


def _table_excess(conn: Connection, role: str, schema: str, table: str) -> list[str]:
    rights, columns = RIGHTS.get(table, (frozenset(), ()))
    qualified = f"{_ident(schema)}.{_ident(table)}"
    checked = [r for r in TABLE_RIGHTS if r not in rights and not (r == "UPDATE" and columns)]
    args: list[Any] = []
    for right in checked:
        args += [role, qualified, right]
    asked = ", ".join("has_table_privilege(%s, %s, %s)" for _ in checked)
    held = conn.run("SELECT " + asked, args)[0] if checked else []
    out = [f"{role} may {right} on {table}" for right, has in zip(checked, held, strict=True) if has]
    if columns:
        rows = conn.run("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT "
                        "attisdropped AND has_column_privilege(%s, attrelid, attnum, 'UPDATE')",
                        (qualified, role))  # fmt: skip
        out += [f"{role} may UPDATE {table}.{r[0]}" for r in rows if r[0] not in columns]
    return out
