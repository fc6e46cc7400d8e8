"""`hivemem ui`: a standard-library HTTP server on loopback under a private name, guarded by a one-time login, a
session cookie bound to that name, a Host check and CSRF tokens; every page is built from the owner's calls to the
daemon. Connections (bounds, timeouts, bodies) are `listen.py`'s."""

from __future__ import annotations

import ipaddress
import re
import signal
import threading
from collections.abc import Callable
from urllib.parse import parse_qs, unquote, urlsplit

from hivemem.client import DaemonClient
from hivemem.errors import HivememError, InvalidParams
from hivemem.web import governance, health, html, hygiene, memories
from hivemem.web.app import Owner, Request, Response, error_page, hivemem_error
from hivemem.web.guard import LOGIN_TTL_S, Guard, Refused, private_name
from hivemem.web.listen import MAX_CONNECTIONS, READ_TIMEOUT_S, BoundedServer, TimedHandler, listen

MAX_BODY = 1 << 20  # a form larger than this is refused before it is read
MAX_FIELDS = 64
# A memory id, a team store's `t:m12` too: its colon encoded as links write it (html.memory_href), or as typed.
MID, SID = r"((?:t%3[Aa]|t:)?m[0-9]{1,18})", r"(s[0-9]{1,18})"
Page = Callable[..., Response]
GET: list[tuple[re.Pattern[str], Page]] = [
    (re.compile(r"/search"), memories.search),
    (re.compile(rf"/memory/{MID}"), memories.detail),
    (re.compile(rf"/memory/{MID}/diff"), memories.diff),
    (re.compile(r"/review"), governance.review),
    (re.compile(r"/drafts"), governance.drafts),
    (re.compile(r"/hygiene"), hygiene.page),
    (re.compile(r"/sessions"), health.sessions),
    (re.compile(rf"/session/{SID}"), health.session),
    (re.compile(r"/clients"), health.clients),
    (re.compile(r"/health"), health.health),
]
POST: list[tuple[re.Pattern[str], Page]] = [
    (re.compile(rf"/memory/{MID}/edit"), memories.edit),
    (re.compile(rf"/memory/{MID}/delete"), memories.delete),
    (re.compile(rf"/memory/{MID}/restore"), memories.restore),
    (re.compile(rf"/memory/{MID}/purge"), memories.purge),
    (re.compile(rf"/memory/{MID}/confirm"), governance.confirm),
    (re.compile(rf"/memory/{MID}/challenge"), governance.challenge),
    (re.compile(rf"/memory/{MID}/archive"), governance.archive),
    (re.compile(r"/hygiene/fix"), hygiene.fix),
]
STATIC = {"style.css": ("text/css; charset=utf-8", html.STYLE), "favicon.svg": ("image/svg+xml", html.FAVICON)}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # not no-referrer: under it Chromium sends `Origin: null` with a same-origin form, which the CSRF check refuses
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Resource-Policy": "same-origin",
}


LOOPBACK = ("127.0.0.1", "::1")  # where browsers send a .localhost name: the UI holds both (D231)
NAMED = (*LOOPBACK, "localhost")  # --host values served under a private name
MAX_READ_TIMEOUT_S = 3600.0


class UIServer(BoundedServer):
    """One listening address of a UI; every listener of one UI shares its owner, guard and connection slots."""

    def __init__(self, address: tuple[str, int], owner: Owner, slots: threading.Semaphore, read_timeout: float) -> None:
        super().__init__(address, Handler, slots, read_timeout)
        self.owner = owner
        self.guard: Guard  # set by open_ui once the port is known


class UI:
    """A running review UI: its listeners (127.0.0.1 and ::1 under a private name, or one exposed address), the
    guard they share, and the warning to show, if any."""

    def __init__(self, servers: list[UIServer], guard: Guard, warning: str) -> None:
        self.servers, self.guard, self.warning = servers, guard, warning
        self.port = servers[0].server_address[1]
        self._threaded: list[UIServer] = []  # listeners serving on threads of their own

    def serve(self, stop: threading.Event) -> None:
        """Serve until `stop` is set, every listener on a thread of its own; then close them all."""
        try:
            self._start(self.servers)
            while not stop.wait(0.2):
                pass
        finally:
            self.close()

    def start(self) -> UI:
        """For embedding (tests, benchmarks): every listener on a thread; `close()` stops them."""
        self._start(self.servers)
        return self

    def close(self) -> None:
        for server in self._threaded:
            server.shutdown()
        self._threaded = []
        for server in self.servers:
            server.server_close()

    def _start(self, servers: list[UIServer]) -> None:
        for server in servers:
            start_in_thread(server)
            self._threaded.append(server)


class Handler(TimedHandler):
    server: UIServer
    server_version = "hivemem-ui"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall between them
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        """Requests are not logged: URLs can carry the login token and queries."""

    def do_GET(self) -> None:
        self.drop_body(MAX_BODY)  # a GET's body means nothing here: read and dropped before anything else
        self._respond(self._get)

    def do_POST(self) -> None:
        self._respond(self._post)

    def _respond(self, build: Callable[[], Response]) -> None:
        try:
            self.server.guard.check_host(self.headers.get("Host"))
            response = build()
        except Refused as exc:
            response = error_page(exc.status, exc.reason)
        except HivememError as exc:
            response = hivemem_error(exc)
        except Exception:  # never a traceback on the page or the terminal
            response = error_page(500, "Something went wrong in hivemem ui; nothing was changed by this page.")
        self.drop_body(MAX_BODY)  # what a refused request left unread is never parsed as the next request
        self._send(response)

    def _get(self) -> Response:
        url = urlsplit(self.path)
        if url.path == "/login":
            return self._login(parse_qs(url.query).get("token", [""])[0])
        if url.path.startswith("/static/"):
            return _static(url.path[len("/static/") :])
        if url.path == "/favicon.ico":  # browsers ask for it whatever the page links: the same SVG
            return _static("favicon.svg")
        csrf = self.server.guard.session(self.headers.get("Cookie"))
        if url.path in ("", "/"):
            return Response(303, location="/search")
        query = _parse(url.query)
        return _route(GET, url.path, self.server.owner, Request(url.path, query, csrf=csrf))

    def _post(self) -> Response:
        url = urlsplit(self.path)
        csrf = self.server.guard.session(self.headers.get("Cookie"))
        form = _parse(self._body())
        sent = form.get("csrf", [None])[0]
        self.server.guard.check_change(csrf, self.headers.get("Origin"), self.headers.get("Sec-Fetch-Site"), sent)
        return _route(POST, url.path, self.server.owner, Request(url.path, {}, form, csrf))

    def _body(self) -> str:
        if self.headers.get("Content-Length") is None:
            raise Refused(411, "A form must say its length.")
        if self.unread > MAX_BODY:
            self.close_connection = True
            raise Refused(413, f"The form is larger than {MAX_BODY // 1024} KiB; nothing was changed.")
        expected = self.unread
        try:
            data = self.read_body()
        except TimeoutError:
            self.close_connection = True
            raise Refused(408, "The form took too long to arrive; nothing was changed.") from None
        if len(data) != expected:
            self.close_connection = True
            raise Refused(400, "The form ended before its stated length; nothing was changed.")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidParams("encoding", "the form is not valid UTF-8") from None

    def _login(self, token: str) -> Response:
        session = self.server.guard.login(token)
        return Response(303, location="/search", headers={"Set-Cookie": self.server.guard.set_cookie(session)})

    def _send(self, response: Response) -> None:
        body = response.body.encode("utf-8")
        self.send_response(response.status)
        headers = {"Content-Type": "text/html; charset=utf-8", **SECURITY_HEADERS, **response.headers}
        if response.location:
            headers["Location"] = response.location
        headers["Content-Length"] = str(len(body))
        if self.close_connection:
            headers["Connection"] = "close"
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _parse(text: str) -> dict[str, list[str]]:
    try:
        return parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except ValueError:
        raise InvalidParams("range", f"more than {MAX_FIELDS} fields") from None


def _route(table: list[tuple[re.Pattern[str], Page]], path: str, owner: Owner, req: Request) -> Response:
    for pattern, page in table:
        match = pattern.fullmatch(path)
        if match:
            return page(owner, req, *(unquote(g) for g in match.groups()))
    return error_page(404, "No such page.")


def _static(name: str) -> Response:
    """Only the files named in STATIC: no path from the URL ever reaches the file system."""
    if name not in STATIC:
        return error_page(404, "No such file.")
    kind, text = STATIC[name]
    return Response(200, text, headers={"Content-Type": kind, "Cache-Control": "no-cache"})


def check_bind(host: str, exposed: bool) -> str:
    """An address other than the loopback ones browsers reach by the private name only with the explicit flag;
    returns the warning to show, if any."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InvalidParams("usage", f"{host} is not an IP address", param="host") from None
    if address.is_unspecified:  # the Host check needs the one address browsers will name
        raise InvalidParams("usage", f"{host} means every interface; name the address to serve on", param="host")
    if not exposed:
        raise InvalidParams(
            "usage",
            f"{host} is not 127.0.0.1; add --expose to serve it there anyway",
            param="host",
            fix="hivemem ui  # serves on 127.0.0.1 under a private name",
        )
    return (
        f"serving the review UI on {host}: anyone who can reach it and gets the login URL acts as the owner of this "
        f"store, over plain HTTP, and a server on another port of {host} that this browser visits receives its "
        "session cookie"
    )


def check_options(host: str, exposed: bool, read_timeout: float) -> str:
    """Refuse what cannot be served, before anything starts; the warning to show, if any."""
    if not 0 < read_timeout <= MAX_READ_TIMEOUT_S:
        raise InvalidParams(
            "usage", f"--read-timeout must be above 0 and at most {MAX_READ_TIMEOUT_S:g} seconds", param="read-timeout"
        )
    return "" if host in NAMED else check_bind(host, exposed)


def open_ui(
    owner: Owner,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exposed: bool = False,
    login_ttl: float = LOGIN_TTL_S,
    read_timeout: float = READ_TIMEOUT_S,
) -> UI:
    """Listen, not serving yet. On loopback (the default, `::1` and `localhost` too) the UI takes the port on both
    127.0.0.1 and ::1 and answers only under a private name (D230, D231); elsewhere on the one address given."""
    warning = check_options(host, exposed, read_timeout)
    named = host in NAMED
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    addresses = list(LOOPBACK) if named else [host]
    try:
        servers = listen(addresses, port, lambda a: UIServer(a, owner, slots, read_timeout))
    except OSError as exc:
        where = " and ".join(addresses)
        raise InvalidParams("usage", f"cannot listen on port {port} of {where}: {exc.strerror}", param="port") from None
    chosen = servers[0].server_address[1]
    guard = Guard(private_name() if named else host, chosen, login_ttl)
    for server in servers:
        server.guard = guard
    return UI(servers, guard, warning)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exposed: bool = False,
    login_ttl: float = LOGIN_TTL_S,
    read_timeout: float = READ_TIMEOUT_S,
    ready: Callable[[str, str], None] | None = None,
    client: DaemonClient | None = None,
) -> int:
    """Serve until interrupted (Ctrl-C); `ready(url, warning)` gets the one-time login URL once it listens.

    The daemon is reached before the port opens, so a store that cannot start fails here, not on the first page.
    """
    check_options(host, exposed, read_timeout)  # a refused option fails before the daemon starts
    owner = Owner(client or DaemonClient(token="@owner", name="web"))
    try:
        owner.call("whoami")
        ui = open_ui(owner, host, port, exposed=exposed, login_ttl=login_ttl, read_timeout=read_timeout)
    except BaseException:
        owner.close()
        raise
    stop = threading.Event()
    restore = on_interrupt(stop)
    try:
        if ready is not None:
            ready(ui.guard.login_url(), ui.warning)
        ui.serve(stop)
    except KeyboardInterrupt:  # only when serving off the main thread, where Ctrl-C is not turned into `stop`
        pass
    finally:
        restore()
        ui.close()
        owner.close()  # the daemon is not kept alive: it stops on its idle timeout as after any client
    return 0


def on_interrupt(stop: threading.Event) -> Callable[[], None]:
    """Ctrl-C (SIGINT) and SIGTERM set `stop` instead of raising wherever the main thread happens to be, so the UI
    always closes the same way and exits 0 (D381); returns what puts the previous handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.signal(sig, lambda _signum, _frame: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def start_in_thread(server: BoundedServer) -> threading.Thread:
    """Serve one listener on a thread; `server.shutdown()` stops it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return thread
