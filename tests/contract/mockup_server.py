"""A small static Redfish server for recorded mockups (read-only).

The folder path below the mockup's root is the URI below ``/redfish/v1``; each
resource is ``index.json``. Like a real BMC it:
- answers a recorded error (``error.txt`` holding ``HTTP 404`` and headers)
  with that status;
- answers a recorded Redfish error body (``{"error": ...}``) with 404 (the
  status was not recorded; ``error_body_status`` changes it);
- matches paths case-insensitively and ignores a trailing slash (HPE iLO
  links to ``/redfish/v1/systems/1/bios/settings/``);
- supports SessionService login (POST Sessions -> 201 + X-Auth-Token, DELETE
  to log out) when ``sessions=True``, otherwise answers 405 so a client falls
  back to basic auth; checks credentials either way;
- refuses every other write with 405 and a Redfish error body.

It counts requests per method and the most requests in flight at once, so
tests can check that a client reuses its session and keeps to its limit.
Runs in a thread (stdlib ``ThreadingHTTPServer``), optionally over TLS.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def shared_dir() -> Path | None:
    """``shared/`` beside the repository (or ``$FLEETCTL_SHARED``), None when absent."""
    env = os.environ.get("FLEETCTL_SHARED")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared"
    return path.resolve() if path.is_dir() else None


def mockups_dir() -> Path | None:
    base = shared_dir()
    if base is None or not (base / "redfish-mockups").is_dir():
        return None
    return base / "redfish-mockups"


def _error(status: int, message_id: str, message: str) -> bytes:
    return json.dumps(
        {
            "error": {
                "code": "Base.1.8.GeneralError",
                "message": "A general error has occurred. See ExtendedInfo for more information.",
                "@Message.ExtendedInfo": [{"MessageId": message_id, "Message": message, "Resolution": "None"}],
            }
        }
    ).encode()


class MockupServer:
    """Serve one mockup folder on 127.0.0.1 (a free port), in a thread."""

    def __init__(
        self,
        root: Path,
        *,
        username: str = "admin",
        password: str = "secret",
        sessions: bool = True,
        delay: float = 0.0,
        error_body_status: int = 404,
        certfile: str | None = None,
        keyfile: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.username = username
        self.password = password
        self.sessions_enabled = sessions
        self.delay = delay
        self.error_body_status = error_body_status
        self.certfile = certfile
        self.keyfile = keyfile
        self.counts: Counter[str] = Counter()
        self.paths: list[tuple[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.tokens: dict[str, str] = {}  # token -> session uri
        self.logins = 0
        self.logouts = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._index: dict[str, Path] = {}
        for dirpath, _dirs, files in os.walk(self.root):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            uri = "/redfish/v1" + ("" if rel == "." else "/" + rel)
            if "index.json" in files or "error.txt" in files:
                self._index[uri.lower()] = Path(dirpath)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        scheme = "https" if self.certfile else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> MockupServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("OData-Version", "4.0")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if body and self.command != "HEAD":
                    self.wfile.write(body)

            def _authorised(self) -> bool:
                token = self.headers.get("X-Auth-Token")
                if token and token in server.tokens:
                    return True
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    try:
                        user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
                    except ValueError:
                        return False
                    return user == server.username and pw == server.password
                return False

            def _handle(self) -> None:
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.counts[self.command] += 1
                    server.paths.append((self.command, self.path))
                try:
                    if server.delay:
                        time.sleep(server.delay)
                    length = int(self.headers.get("Content-Length") or 0)
                    raw = self.rfile.read(length) if length else b""
                    self._route(raw)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _route(self, raw: bytes) -> None:
                path = self.path.split("?", 1)[0].rstrip("/") or "/"
                low = path.lower()
                sessions_uri = "/redfish/v1/sessionservice/sessions"
                if self.command == "POST" and low == sessions_uri:
                    if not server.sessions_enabled:
                        return self._send(405, _error(405, "Base.1.8.OperationNotAllowed", "Sessions are disabled"))
                    try:
                        creds = json.loads(raw or b"{}")
                    except ValueError:
                        return self._send(400, _error(400, "Base.1.8.MalformedJSON", "bad JSON"))
                    if creds.get("UserName") != server.username or creds.get("Password") != server.password:
                        return self._send(401, _error(401, "Base.1.8.NoValidSession", "Invalid credentials"))
                    token = secrets.token_hex(16)
                    sid = secrets.token_hex(4)
                    uri = f"/redfish/v1/SessionService/Sessions/{sid}"
                    with server._lock:
                        server.tokens[token] = uri
                        server.logins += 1
                    body = json.dumps({"@odata.id": uri, "Id": sid, "UserName": server.username}).encode()
                    return self._send(201, body, {"X-Auth-Token": token, "Location": uri})
                if self.command == "DELETE" and low.startswith(sessions_uri + "/"):
                    with server._lock:
                        for tok, uri in list(server.tokens.items()):
                            if uri.lower() == low:
                                del server.tokens[tok]
                                server.logouts += 1
                                return self._send(204)
                    return self._send(404, _error(404, "Base.1.8.ResourceMissingAtURI", f"{path} not found"))
                public = low in ("/redfish", "/redfish/v1", "/redfish/v1/odata", "/redfish/v1/$metadata")
                if not public and not self._authorised():
                    return self._send(401, _error(401, "Base.1.8.NoValidSession", "Authentication required"))
                if self.command not in ("GET", "HEAD"):
                    return self._send(
                        405, _error(405, "Base.1.8.OperationNotAllowed", "This recorded service is read-only")
                    )
                folder = server._index.get(low)
                if folder is None:
                    return self._send(404, _error(404, "Base.1.8.ResourceMissingAtURI", f"{path} not found"))
                err = folder / "error.txt"
                index = folder / "index.json"
                if err.exists() and not index.exists():
                    first = err.read_text().splitlines()[0].split()
                    status = int(first[1]) if len(first) > 1 and first[1].isdigit() else 500
                    return self._send(status)
                body = index.read_bytes()
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = None
                if isinstance(doc, dict) and "error" in doc and "@odata.id" not in doc:
                    return self._send(server.error_body_status, body)
                etag = doc.get("@odata.etag") if isinstance(doc, dict) else None
                return self._send(200, body, {"ETag": etag} if etag else None)

            do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        if self.certfile:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.certfile, self.keyfile)
            # handshake in the handler thread, on first read, never in the accept loop
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="mockup-server", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


if __name__ == "__main__":  # python tests/contract/mockup_server.py hpe-xl675d-a40-ilo5
    import sys

    base = mockups_dir()
    if base is None:
        sys.exit("shared/redfish-mockups not found (set FLEETCTL_SHARED)")
    with MockupServer(base / sys.argv[1]) as srv:
        print(srv.url, "admin/secret; Ctrl-C to stop")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
