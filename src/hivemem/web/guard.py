"""Who may talk to the UI: the Host check (a private name per run, DNS rebinding), the one-time login, the session
cookie and CSRF.

Pure request checks over header values; the server decides what to answer.
"""

from __future__ import annotations

import base64
import hmac
import secrets
import threading
import time

LOGIN_TTL_S = 600.0  # an unused login link stops working after ten minutes


class Refused(Exception):
    """A request the guard turns away: `status` is the HTTP status, `reason` what the error page says."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def private_name() -> str:
    """A host name of this run alone under `.localhost`, which browsers resolve to loopback themselves (D230).

    The session cookie is bound to it, and browsers send a cookie to every port of its host: 120 random bits keep
    another local user's server from being visited under it.
    """
    return "hivemem-" + base64.b32encode(secrets.token_bytes(15)).decode().lower() + ".localhost"


class Guard:
    """One UI process's secrets: a login token usable once, then sessions each with their own CSRF token.

    `name` is the host the UI answers on: a `private_name()` on loopback, else the exposed address.
    """

    def __init__(self, name: str, port: int, login_ttl: float = LOGIN_TTL_S) -> None:
        self.origin = f"http://{_authority(name, port)}"
        self.hosts = {_authority(name, port).lower()}
        if port == 80:  # browsers leave the default port out of Host
            self.hosts.add(_authority(name, port).rsplit(":", 1)[0].lower())
        self.cookie = f"hivemem_ui_{port}"  # one name per port, so two exposed UIs on one address never clash
        self.login_token: str | None = secrets.token_urlsafe(32)
        self.login_deadline = time.monotonic() + login_ttl
        self._sessions: dict[str, str] = {}  # session id -> its CSRF token
        self._lock = threading.Lock()

    def login_url(self) -> str:
        assert self.login_token is not None
        return f"{self.origin}/login?token={self.login_token}"

    def check_host(self, host: str | None) -> None:
        """Only our own authority: another name or address of this port (127.0.0.1, localhost, a page whose name
        resolves here by DNS rebinding) is refused, whatever cookie it carries (D230)."""
        given = (host or "").lower().encode()  # compared in constant time: the name is part of the secret
        if not any(hmac.compare_digest(given, allowed.encode()) for allowed in self.hosts):
            raise Refused(
                421,
                "This address is not served here: the UI answers only on the name in the login URL that "
                "`hivemem ui` printed (http://hivemem-….localhost:…).",
            )

    def login(self, token: str) -> str:
        """Exchange the one-time token for a new session id; it never works a second time."""
        with self._lock:
            if self.login_token is None:
                raise Refused(403, "This login link was already used. Run `hivemem ui` again for a new one.")
            if not hmac.compare_digest(token.encode(), self.login_token.encode()):
                raise Refused(403, "This login link is not valid. Use the URL `hivemem ui` printed.")
            if time.monotonic() > self.login_deadline:
                self.login_token = None
                raise Refused(403, "This login link has expired. Run `hivemem ui` again for a new one.")
            self.login_token = None
            session = secrets.token_urlsafe(32)
            self._sessions[session] = secrets.token_urlsafe(32)
            return session

    def session(self, cookie_header: str | None) -> str:
        """The CSRF token of the session the cookie names; no valid cookie is a refusal."""
        values = _cookies(cookie_header, self.cookie)  # every one: a second cookie of the name cannot hide ours
        with self._lock:
            for session, csrf in self._sessions.items():
                if any(hmac.compare_digest(value.encode(), session.encode()) for value in values):
                    return csrf
        raise Refused(401, "Not logged in. Open the one-time login URL that `hivemem ui` printed.")

    def set_cookie(self, session: str) -> str:
        """Host-only (no Domain): the browser sends it to the private name alone, never to 127.0.0.1 or localhost."""
        return f"{self.cookie}={session}; HttpOnly; SameSite=Strict; Path=/"

    def check_change(self, csrf: str, origin: str | None, fetch_site: str | None, sent: str | None) -> None:
        """A request that changes something: same origin, and the form's token must be this session's."""
        if origin is not None and origin != self.origin:
            raise Refused(403, "Cross-site request refused.")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            raise Refused(403, "Cross-site request refused.")
        if sent is None or not hmac.compare_digest(sent.encode(), csrf.encode()):
            raise Refused(403, "The form's security token is missing or stale: reload the page and try again.")


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _cookies(header: str | None, name: str) -> list[str]:
    values = []
    for part in (header or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            values.append(value)
    return values
