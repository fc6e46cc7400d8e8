"""The PostgreSQL backend (docs/team.md): a team store shared by several machines' daemons. Everything PostgreSQL
specific lives here: the connection adapter, the schema and its migrations, text search, checks."""
