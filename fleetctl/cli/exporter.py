"""`fleetctl exporter`: serve the latest sweep on /metrics for Prometheus.

A scrape reads the store, never the fleet: it renders the latest finished
sweep run (a few indexed queries) and answers. The sweep itself runs on its
own schedule (the systemd timer or the Kubernetes CronJob of deploy/).

When the store cannot be read the scrape still answers 200, with
``fleetctl_exporter_last_scrape_error 1`` and no sweep metrics (as
mysqld_exporter does): Prometheus keeps ``up`` for "the exporter answers",
and the alert on the store is one PromQL line. Before the first finished
sweep the answer has only the exporter's own metrics.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetctl.cli.common import host_port

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

DEFAULT_LISTEN = "127.0.0.1:9877"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9877`` for IPv6, ``:9877`` for every address) as (host, port).

    Raises:
        InputError: not HOST:PORT with a port from 0 to 65535 (exit 2, naming --listen).
    """
    from fleetctl.errors import InputError

    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        sep = ""  # an IPv6 address without brackets: ambiguous
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or any(c.isspace() for c in host):
        raise InputError(f"{text!r}: give HOST:PORT, e.g. {DEFAULT_LISTEN} or [::1]:9877", field="--listen")
    return host, int(port)


def scrape(partial: bool = False) -> tuple[int, str]:
    """One scrape: (HTTP status, exposition text) from the latest finished sweep in the store.

    Args:
        partial: serve the latest finished run even when it swept only part of
            the fleet; by default the latest run of the whole fleet, so that an
            operator's `fleetctl sweep rack-12` does not make every other
            target's series vanish.
    """
    import time

    from fleetctl.errors import NotFound
    from fleetctl.store import get_engine
    from fleetctl.sweep.prometheus import Family, exposition, families, latest_full_run

    t0 = time.perf_counter()
    fams: list[Family] = []
    error = 0
    try:
        with get_engine().connect() as c:
            fams = families(c, None if partial else latest_full_run(c))
    except NotFound:
        pass  # no finished sweep yet: nothing to say about the fleet, and nothing wrong
    except Exception as e:  # noqa: BLE001 - any failure to read the store is reported as a metric, and logged
        error = 1
        orig = getattr(e, "orig", None) or e
        first = (str(orig).splitlines() or [""])[0]
        print(f"fleetctl exporter: cannot read the store: {type(orig).__name__}: {first}", file=sys.stderr, flush=True)
    err = Family("fleetctl_exporter_last_scrape_error", "1 if this scrape could not read the store (no sweep metrics then), else 0.")
    err.add(error)
    took = Family("fleetctl_exporter_scrape_duration_seconds", "Seconds this scrape took to read the store and render.")
    took.add(round(time.perf_counter() - t0, 6))
    return 200, exposition([*fams, err, took])


# Methods HTTP defines that the exporter does not serve: 405 with Allow (RFC 9110 15.5.6), as node_exporter's Go
# server does; a method HTTP does not define stays 501. Either answer is plain text, never Python's HTML error page.
OTHER_METHODS = ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT")
ALLOW = "GET, HEAD"


def make_server(host: str, port: int, *, partial: bool = False) -> ThreadingHTTPServer:
    """The HTTP server: GET (or HEAD) /metrics renders a scrape, / a page that links it, any other path is 404; another
    method is 405 with ``Allow: GET, HEAD``. The Server header names the exporter, not the Python that runs it."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from fleetctl.sweep.prometheus import CONTENT_TYPE

    # One scrape at a time: several Prometheus servers scraping at once queue
    # here instead of multiplying the load on the store.
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        server_version = "fleetctl-exporter"
        # http.server's own errors (a malformed request line, a method HTTP does not define): plain text too
        error_message_format = "%(code)d %(message)s\n"
        error_content_type = "text/plain; charset=utf-8"

        def version_string(self) -> str:
            return self.server_version  # not "BaseHTTP/0.6 Python/3.11.x": the versions are no one's business

        def _send(self, status: int, body: bytes, ctype: str, head: bool = False, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _not_allowed(self) -> None:
            self.close_connection = True  # a body the client may have sent is not read
            self._send(405, f"method {self.command} not allowed: {ALLOW}\n".encode(), "text/plain; charset=utf-8",
                       headers={"Allow": ALLOW})  # fmt: skip

        def __getattr__(self, name: str) -> Any:
            # BaseHTTPRequestHandler looks up do_<METHOD>; the methods HTTP defines beyond GET and HEAD are 405.
            if name.startswith("do_") and name[3:] in OTHER_METHODS:
                return self._not_allowed
            raise AttributeError(name)

        def _answer(self, head: bool) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                with lock:
                    status, text = scrape(partial)
                self._send(status, text.encode(), CONTENT_TYPE, head)
            elif path == "/":
                body = b'<html><body><h1>fleetctl exporter</h1><a href="/metrics">/metrics</a></body></html>\n'
                self._send(200, body, "text/html; charset=utf-8", head)
            else:
                self._send(404, b"not found: try /metrics\n", "text/plain; charset=utf-8", head)

        def do_GET(self) -> None:
            self._answer(head=False)

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a line per scrape is noise; errors are logged by scrape()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    return Server((host, port), Handler)


def command(
    listen: Annotated[str, typer.Option("--listen", help="HOST:PORT to serve /metrics on ([::]:9877 or 0.0.0.0:9877: every address).",
                                             callback=host_port)
                      ] = DEFAULT_LISTEN,  # fmt: skip
    partial: Annotated[bool, typer.Option("--partial", help="Serve the latest run even when it swept part of the fleet "
                                          "(sweep rack-12); by default the latest `sweep all`.")] = False,  # fmt: skip
) -> None:
    """Serve the latest sweep on /metrics for Prometheus; a scrape reads the store, never the fleet.

    Run the sweep on a schedule (`fleetctl sweep all`, deploy/); each scrape
    renders the latest finished sweep of the whole fleet (with --partial: the
    latest finished run, whatever it swept). See docs/metrics.md.
    """
    import signal
    import threading

    from fleetctl.cli.common import fleet_label
    from fleetctl.errors import FleetError

    host, port = parse_listen(listen)
    try:
        server = make_server(host, port, partial=partial)
    except OSError as e:
        raise FleetError(f"--listen {listen}: {e.strerror or e}") from e
    shown_host = f"[{host}]" if ":" in host else host
    typer.echo(f"serving /metrics on http://{shown_host}:{server.server_address[1]} (fleet: {fleet_label()})")
    sys.stdout.flush()

    # SIGTERM (systemd, Kubernetes) stops it as Ctrl-C does: finish the scrape
    # in flight, close the socket, exit 0. shutdown() must come from another
    # thread than serve_forever's.
    def _stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    main = threading.current_thread() is threading.main_thread()  # signals can only be set there
    old = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)} if main else {}
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        server.server_close()
    typer.echo("exporter stopped", err=True)
