"""Issue #25 item 14: the exporter's HTTP answers beyond GET /metrics.

POST, OPTIONS and the other methods HTTP defines: 405 with ``Allow: GET,
HEAD``, plain text (Python's http.server answered 501 with its HTML page); a
method HTTP does not define: 501, plain text; the Server header names the
exporter and no Python version; ``/`` is the small page the Kubernetes probes
of deploy/kubernetes/exporter.yaml ask for (200; docs/metrics.md said 404 and
is corrected), any other path 404.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fleetctl.cli.exporter import make_server


@pytest.fixture
def port() -> Iterator[int]:
    server = make_server("127.0.0.1", 0)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        t.join(10)


def ask(port: int, method: str, path: str = "/metrics", body: bytes | None = None) -> tuple[int, dict[str, str], str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
@pytest.mark.parametrize("path", ["/metrics", "/"])
def test_other_methods_are_405_with_allow_in_plain_text(port: int, method: str, path: str) -> None:
    status, headers, text = ask(port, method, path, body=b"x=1" if method in ("POST", "PUT", "PATCH") else None)
    assert status == 405, (status, text)
    assert headers["allow"] == "GET, HEAD"
    assert headers["content-type"].startswith("text/plain")
    assert "<" not in text and method in text


def test_a_method_http_does_not_define_is_501_in_plain_text(port: int) -> None:
    status, headers, text = ask(port, "BREW")
    assert status == 501 and headers["content-type"].startswith("text/plain") and "<" not in text, (status, headers, text)


@pytest.mark.parametrize("method,path", [("GET", "/metrics"), ("GET", "/"), ("GET", "/nosuch"), ("POST", "/metrics"), ("BREW", "/")])
def test_the_server_header_names_no_python(port: int, method: str, path: str) -> None:
    _, headers, _ = ask(port, method, path)
    assert headers["server"] == "fleetctl-exporter", headers


def test_paths(port: int) -> None:
    status, headers, text = ask(port, "GET", "/metrics")
    assert status == 200 and "fleetctl_exporter_last_scrape_error 0" in text
    status, _, text = ask(port, "GET", "/")
    assert status == 200 and 'href="/metrics"' in text  # the probes' page (deploy/kubernetes/exporter.yaml)
    status, headers, _ = ask(port, "HEAD", "/")
    assert status == 200
    status, headers, text = ask(port, "GET", "/nosuch")
    assert status == 404 and headers["content-type"].startswith("text/plain")


def test_the_probes_and_the_docs_agree(port: Any) -> None:
    """The Deployment probes `/`, and docs/metrics.md says what `/` answers (it said 404)."""
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    dep = next(d for d in yaml.safe_load_all((repo / "deploy" / "kubernetes" / "exporter.yaml").read_text()) if d["kind"] == "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    probed = {c[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe") if p in c}
    assert probed == {"/"}
    doc = (repo / "docs" / "metrics.md").read_text()
    assert "anything else 404" not in doc
    assert "`/` answers 200" in doc and "405" in doc
