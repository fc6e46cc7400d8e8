"""`hivemem ui`: a standard-library HTTP server on loopback, guarded by a one-time login, a session cookie,
a Host check and CSRF tokens; every page is built from the owner's calls to the daemon."""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from hivemem.client import DaemonClient
from hivemem.errors import HivememError, InvalidParams
from hivemem.web import governance, health, html, hygiene, memories
from hivemem.web.app import Owner, Request, Response, error_page, hivemem_error
from hivemem.web.guard import LOGIN_TTL_S, Guard, Refused

MAX_BODY = 1 << 20  # a form larger than this is refused before it is read
MAX_FIELDS = 64
MID, SID = r"(m[0-9]{1,18})", r"(s[0-9]{1,18})"
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
STATIC = {"style.css": ("text/css; charset=utf-8", html.STYLE)}
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


class UIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, owner: Owner, login_ttl: float) -> None:
        import socket

        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), Handler)
        self.owner = owner
        self.guard = Guard(host, self.server_address[1], login_ttl)

    def handle_error(self, request: object, client_address: object) -> None:
        """A browser that closes a connection mid-reply is not an error worth a traceback on the terminal."""


class Handler(BaseHTTPRequestHandler):
    server: UIServer
    protocol_version = "HTTP/1.1"
    server_version = "hivemem-ui"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall between them
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        """Requests are not logged: URLs can carry the login token and queries."""

    def do_GET(self) -> None:
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
        self._send(response)

    def _get(self) -> Response:
        url = urlsplit(self.path)
        if url.path == "/login":
            return self._login(parse_qs(url.query).get("token", [""])[0])
        if url.path.startswith("/static/"):
            return _static(url.path[len("/static/") :])
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
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            raise Refused(411, "A form must say its length.")
        if int(length) > MAX_BODY:
            self.close_connection = True
            raise Refused(413, f"The form is larger than {MAX_BODY // 1024} KiB; nothing was changed.")
        try:
            return self.rfile.read(int(length)).decode("utf-8")
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
            return page(owner, req, *match.groups())
    return error_page(404, "No such page.")


def _static(name: str) -> Response:
    """Only the files named in STATIC: no path from the URL ever reaches the file system."""
    if name not in STATIC:
        return error_page(404, "No such file.")
    kind, text = STATIC[name]
    return Response(200, text, headers={"Content-Type": kind, "Cache-Control": "no-cache"})


def check_bind(host: str, exposed: bool) -> str:
    """A non-loopback address only with the explicit flag; returns the warning to show, if any."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost":
            return ""
        raise InvalidParams("usage", f"{host} is not an IP address", param="host") from None
    if address.is_loopback:
        return ""
    if address.is_unspecified:  # the Host check needs the one address browsers will name
        raise InvalidParams("usage", f"{host} means every interface; name the address to serve on", param="host")
    if not exposed:
        raise InvalidParams(
            "usage",
            f"{host} is not a loopback address; add --expose to serve it there anyway",
            param="host",
            fix="hivemem ui  # serves on 127.0.0.1",
        )
    return (
        f"serving the review UI on {host}: anyone who can reach it and gets the login URL acts "
        "as the owner of this store, over plain HTTP"
    )


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exposed: bool = False,
    login_ttl: float = LOGIN_TTL_S,
    ready: Callable[[str, str], None] | None = None,
    client: DaemonClient | None = None,
) -> int:
    """Serve until interrupted (Ctrl-C); `ready(url, warning)` gets the one-time login URL once it listens.

    The daemon is reached before the port opens, so a store that cannot start fails here, not on the first page.
    """
    warning = check_bind(host, exposed)
    owner = Owner(client or DaemonClient(token="@owner", name="web"))
    owner.call("whoami")
    try:
        server = UIServer(host, port, owner, login_ttl)
    except OSError as exc:
        owner.close()
        raise InvalidParams("usage", f"cannot listen on {host}:{port}: {exc.strerror}", param="port") from None
    if ready is not None:
        ready(server.guard.login_url(), warning)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        owner.close()  # the daemon is not kept alive: it stops on its idle timeout as after any client
    return 0


def start_in_thread(server: UIServer) -> threading.Thread:
    """For embedding (tests, scripts): serve on a thread; `server.shutdown()` stops it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return thread
