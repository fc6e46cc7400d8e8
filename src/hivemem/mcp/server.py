"""`hivemem mcp`: a stdio MCP server on the official SDK, one lazy daemon connection per session (docs/mcp.md)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import anyio
from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from hivemem import __version__
from hivemem.client import DaemonClient
from hivemem.errors import Failed, HivememError, Unsupported
from hivemem.manifest import TRUST_SENTENCE, Verb
from hivemem.mcp import stdio, tools

log = logging.getLogger("hivemem.mcp")
BROKEN = ("unavailable.daemon_gone", "failed.protocol")  # the connection is unusable after these

INSTRUCTIONS = (
    "hivemem is a memory store shared by agents and people. Search it (memory_search) before answering "
    "about past work, decisions or conventions; store durable facts, decisions, conventions, preferences and "
    "lessons with memory_add in space @project (this repository) or @user. " + TRUST_SENTENCE
)


class Connection:
    """The session's one daemon connection: opened on the first call, reopened on the call after it broke.

    Calls block, and the server makes them on the event loop, so they never overlap: a stdio session is one
    client whose requests are answered in order anyway, and a hop to a worker thread and back cost more than
    the search (D45).
    """

    def __init__(self, cwd: str, token: HivememError | str | None = None) -> None:
        self.cwd = cwd
        self.token = token  # None: HIVEMEM_TOKEN; a string: a saved token (--client); an error: why there is none
        self._client: DaemonClient | None = None

    def call(self, verb: Verb, arguments: Mapping[str, object]) -> Mapping[str, object]:
        """Resolve placeholders, send one request, return its `ok`."""
        client = self._connected()
        params = tools.prepare(verb, arguments, self.cwd, client.config["recall.team_spaces"])
        try:
            return client.request(verb.name, params)
        except HivememError as exc:
            if exc.code in BROKEN:
                self._drop()  # never resend a started request; the next call reconnects
            raise

    def _connected(self) -> DaemonClient:
        if self._client is not None and not self._client.alive():
            self._drop()
        if isinstance(self.token, HivememError):
            raise self.token  # `--client NAME` with no saved token: every call says which command to run
        if self._client is None:
            client = DaemonClient(token=self.token, name="mcp")
            try:
                client.connect()
            except BaseException:
                client.close()
                raise
            for warning in client.warnings:
                log.warning("%s", warning)
            self._client = client
        return self._client

    def _drop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        self._drop()


def ok_result(ok: Mapping[str, object], noticed: bool) -> dict[str, object]:
    """A result: the verb's `ok` as structured content, led by `notice` when it carries memory text (D271), and a
    text block with the same JSON after the untrusted-data sentence, for clients that show only text.

    Results are the wire dicts, not the SDK's models: the SDK validates and dumps a handler's result on its way
    out anyway, and a model built here was dumped once more before that (D273)."""
    text = tools.result_text(ok, noticed)
    structured = {"notice": TRUST_SENTENCE, **ok} if noticed else ok
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def error_result(exc: HivememError) -> dict[str, object]:
    """A tool error: one text block holding `{code, message, data}`, and no structured content, which clients
    would check against the tool's output schema and report as a schema failure instead of the error
    (docs/decisions.md D270)."""
    return {"content": [{"type": "text", "text": tools.dumps(exc.to_wire())}], "isError": True}


def tool(name: str, verb: Verb) -> types.Tool:
    hints = types.ToolAnnotations.model_validate(tools.hints(verb))
    return types.Tool(name=name, description=tools.description(name), input_schema=dict(tools.input_schema(verb)),
                      output_schema=dict(tools.output_schema(verb)), annotations=hints)  # fmt: skip


def build(connection: Connection, which: str = "default") -> Server[Any]:
    """The low-level server: tools listed from the manifest, each call a few lines over the daemon connection."""
    served = tools.selected(which)
    noticed = {name: tools.carries_memory_text(verb) for name, verb in served.items()}
    listed = types.ListToolsResult(tools=[tool(name, verb) for name, verb in served.items()])

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        verb = served.get(params.name)
        if verb is None:
            return error_result(Unsupported("verb", f"unknown tool {params.name!r}", tool=params.name))
        try:
            ok = connection.call(verb, params.arguments or {})  # on the loop: see Connection
        except HivememError as exc:
            return error_result(exc)
        except Exception as exc:  # a bug answers as a tool error; the session goes on
            log.exception("tool %s failed", params.name)
            return error_result(Failed("internal", f"internal error: {type(exc).__name__}"))
        return ok_result(ok, noticed[params.name])

    return Server("hivemem", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)  # fmt: skip


async def serve(cwd: str, token: HivememError | str | None = None, which: str = "default") -> None:
    connection = Connection(cwd, token)
    server = build(connection, which)
    server.middleware = []  # the SDK's OpenTelemetry spans: hivemem exports no telemetry (D45)
    pipes = stdio.is_pipe(0) and stdio.is_pipe(1)
    try:
        async with stdio.pipe_server() if pipes else stdio_server() as streams:
            read, write = stdio.answering(*streams)
            await server.run(read, write, server.create_initialization_options())
    finally:
        connection.close()


def run(token: HivememError | str | None = None, which: str = "default") -> int:
    """Serve MCP on stdin/stdout until the harness closes them; `token` as for Connection; the tool set `which`
    (`default` or `all`)."""
    anyio.run(serve, os.getcwd(), token, which)
    return 0
