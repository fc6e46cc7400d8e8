"""ADAPTER: `hivemem mcp`, a stdio MCP server whose tools are generated from the manifest."""
