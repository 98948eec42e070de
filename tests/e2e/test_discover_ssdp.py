"""`fleetctl discover --ssdp` across a veth between two network namespaces this test creates.

Namespace B holds a Redfish service that answers SSDP as the Redfish
specification says (``ST: urn:dmtf-org:service:redfish-rest:1``, the service
root in ``AL``, ``USN: uuid:...``) and serves its service root over HTTPS;
namespace A runs the real CLI, which multicasts the M-SEARCH and probes what
answered. A second responder answers for another service type and must be
left out. The root namespace is not touched. Needs root and ``ip netns``;
skips with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetctl.discovery.ssdp import REDFISH_ST, m_search, parse_reply

RESPONDER = textwrap.dedent(
    '''
    import socket, ssl, struct, sys, threading, json
    from http.server import BaseHTTPRequestHandler, HTTPServer
    addr, https_port, cert, key, st = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    root = {"@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "RedfishVersion": "1.15.0",
            "UUID": "4C4C4544-0042-4410-8052-B4C04F333432", "Vendor": "Dell", "Product": "Integrated Dell Remote Access Controller"}
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(root).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    if https_port:
        httpd = HTTPServer((addr, https_port), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", 1900))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton("239.255.255.250") + socket.inet_aton(addr))
    print("ready", flush=True)
    while True:
        data, peer = s.recvfrom(8192)
        if not data.startswith(b"M-SEARCH"):
            continue
        reply = ("HTTP/1.1 200 OK\\r\\nCACHE-CONTROL: max-age=1800\\r\\nEXT:\\r\\n"
                 f"AL: https://{addr}:{https_port}/redfish/v1/\\r\\nLOCATION: https://{addr}:{https_port}/redfish/v1/\\r\\n"
                 f"ST: {st}\\r\\nUSN: uuid:4c4c4544-0042-4410-8052-b4c04f333432::{st}\\r\\n\\r\\n")
        s.sendto(reply.encode(), peer)
    '''
)


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not shutil.which("ip"):
        return "needs iproute2 (ip netns)"
    probe = f"fdsprobe{uuid.uuid4().hex[:6]}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*args: str) -> None:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {r.stderr.strip()}")


@pytest.fixture
def two_namespaces(tmp_path: Path) -> Iterator[dict[str, str]]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"fdsa{tag}", f"fdsb{tag}"
    va, vb = f"fda{tag}", f"fdb{tag}"
    procs: list[subprocess.Popen[str]] = []
    try:
        sh("ip", "netns", "add", ns_a)
        sh("ip", "netns", "add", ns_b)
        # The pair is made inside A and one end moved to B: the root namespace never holds either.
        sh("ip", "-n", ns_a, "link", "add", va, "type", "veth", "peer", "name", vb)
        sh("ip", "-n", ns_a, "link", "set", vb, "netns", ns_b)
        for ns, dev, addr in ((ns_a, va, "198.18.7.1/24"), (ns_b, vb, "198.18.7.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        from tests_unit_discovery_certs import make_cert  # type: ignore[import-not-found]

        cert, key, fp = make_cert(tmp_path)
        script = tmp_path / "responder.py"
        script.write_text(RESPONDER)
        for st, port in ((REDFISH_ST, "8443"), ("urn:schemas-upnp-org:device:MediaServer:1", "0")):
            p = subprocess.Popen(["ip", "netns", "exec", ns_b, sys.executable, str(script), "198.18.7.2", port, str(cert), str(key), st],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
            procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
        yield {"ns_a": ns_a, "ns_b": ns_b, "fingerprint": fp}
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=5)
        subprocess.run(["ip", "netns", "del", ns_a], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns_b], capture_output=True)


@pytest.fixture(autouse=True)
def _cert_helper_importable() -> None:
    # The certificate maker lives beside the unit tests of discovery; it is loaded by path (no package there).
    import importlib.util

    if "tests_unit_discovery_certs" not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "unit" / "discovery" / "discovery_servers.py"
        spec = importlib.util.spec_from_file_location("tests_unit_discovery_certs", path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules["tests_unit_discovery_certs"] = mod
        spec.loader.exec_module(mod)


def test_discover_ssdp_across_namespaces(two_namespaces: dict[str, str], tmp_path: Path) -> None:
    fleetctl = Path(sys.executable).parent / "fleetctl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETCTL_")}
    env.update(FLEETCTL_DB=str(tmp_path / "fleet.db"), FLEETCTL_DATA_DIR=str(tmp_path / "data"))
    r = subprocess.run(["ip", "netns", "exec", two_namespaces["ns_a"], str(fleetctl), "discover", "--ssdp", "--ssdp-wait", "2",
                        "--ssdp-interface", "198.18.7.1", "-o", "json"], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(p["address"], p["url"], p["uuid"], p["vendor"], p["fingerprint"]) for p in doc["proposals"]] == [
        ("198.18.7.2", "https://198.18.7.2:8443", "4c4c4544-0042-4410-8052-b4c04f333432", "Dell", two_namespaces["fingerprint"])
    ]
    assert doc["proposals"][0]["sources"]["bmc"] == "ssdp + range probe 198.18.7.2:8443"


def test_parse_reply_takes_only_redfish_answers() -> None:
    ok = (b"HTTP/1.1 200 OK\r\nAL: https://10.0.0.9/redfish/v1/\r\nST: urn:dmtf-org:service:redfish-rest:1\r\n"
          b"USN: uuid:ABC-1::urn:dmtf-org:service:redfish-rest:1\r\n\r\n")  # fmt: skip
    r = parse_reply(ok, "10.0.0.8")
    assert r is not None and (r.address, r.port, r.uuid, r.sender) == ("10.0.0.9", 443, "abc-1", "10.0.0.8")
    assert parse_reply(ok.replace(b"redfish-rest", b"other"), "10.0.0.8") is None
    assert parse_reply(b"NOTIFY * HTTP/1.1\r\n\r\n", "10.0.0.8") is None
    named = ok.replace(b"https://10.0.0.9/", b"https://bmc-9.example:8443/")
    r = parse_reply(named, "10.0.0.8")
    assert r is not None and (r.address, r.port) == ("10.0.0.8", 8443)  # a host name: the sender is probed, never resolved
    assert b"ST: urn:dmtf-org:service:redfish-rest:1\r\n" in m_search()
