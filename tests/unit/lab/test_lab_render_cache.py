"""The lab BMC's pre-rendered GET answers: byte for byte what rendering gives, and never stale.

A BMC keeps each rendered GET answer (server.py ``Rendered``) while its state
version is unchanged and its lazily computed state (a power phase, a running
task, the clock shown to the second) has not moved. These tests change the
state every way a client or the control API can, right after the answer was
kept, and read it again.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fleetctl_lab.bmc import LabConfig, LabServerSpec, run_lab_in_thread
from fleetctl_lab.bmc.flavours import FLAVOURS
from lab_client_helpers import RF

TIMING = dict(power_transition_s=0.3, graceful_shutdown_s=0.3, firmware_update_s=0.5)


def _spec(flavour: str) -> LabServerSpec:
    return LabServerSpec(name=f"rc-{flavour}", flavour=flavour, serial=f"SN-{flavour}",
                         boards=[{"kind": "gpu", "serial": f"G-{flavour}-1", "slot": 1}],
                         nics=[{"name": "eth0", "mac": "02:00:00:00:00:01", "slot": 10}])  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cfg = LabConfig(state_dir=tmp_path_factory.mktemp("lab"), initial_power="On", **TIMING)
    with run_lab_in_thread([_spec(f) for f in FLAVOURS], cfg) as running:
        yield running
    for sock in _SOCKS.values():
        sock.close()
    _SOCKS.clear()


_SOCKS: dict[str, ssl.SSLSocket] = {}
_AUTH = "Basic " + base64.b64encode(b"admin:labpass").decode()


def _raw(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers in the order sent but Date, body) of one GET as it went over the wire, on one
    kept-alive connection per BMC."""
    sock = _SOCKS.get(url)
    if sock is None:
        u = urlsplit(url)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        sock = _SOCKS[url] = ctx.wrap_socket(socket.create_connection((u.hostname or "", u.port or 443), timeout=5))
    lines = [f"GET {path} HTTP/1.1", f"Host: {urlsplit(url).netloc}", f"Authorization: {_AUTH}",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]  # fmt: skip
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    hdrs = [(k, v.strip()) for k, _, v in (h.partition(":") for h in header_lines)]
    size = int(dict(hdrs).get("Content-Length", "0"))
    while len(body) < size:
        body += sock.recv(65536)
    return int(status_line.split()[1]), [h for h in hdrs if h[0] != "Date"], body


def _hits(lab: Any) -> int:
    return int(lab.call(lambda: lab.lab.render_cache()["hits"]))


def _links(doc: Any) -> list[str]:
    out: list[str] = []
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "@odata.id" and isinstance(v, str) and "#" not in v:
                    out.append(v.rstrip("/"))
                elif k not in ("Actions", "Links"):
                    stack.append(v)
        elif isinstance(x, list):
            stack.extend(x)
    return out


def _tree(url: str) -> list[str]:
    """Every document reachable from the service root (the sessions aside: never kept)."""
    seen, todo, found = {"/redfish/v1"}, ["/redfish/v1"], []
    while todo:
        path = todo.pop()
        status, _, body = _raw(url, path)
        if status != 200:
            continue
        found.append(path)
        for link in _links(json.loads(body)):
            if link not in seen and "/SessionService/Sessions" not in link:
                seen.add(link)
                todo.append(link)
    return found


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_a_kept_answer_is_the_rendered_one_byte_for_byte(lab: Any, flavour: str) -> None:
    name = f"rc-{flavour}"
    url = lab.url_of(name)
    bmc = lab.lab.bmc(name)
    paths = _tree(url)
    assert len(paths) > 20, paths
    for _ in range(3):
        lab.call(bmc.touch)  # the next GETs render
        rendered = {p: _raw(url, p) for p in paths}
        h0 = _hits(lab)
        kept = {p: _raw(url, p) for p in paths}
        # only a DateTime shown to the second may have moved on between the two reads (then rendered anew)
        moved = [p for p in paths if kept[p] != rendered[p]]
        assert all(b'"DateTime"' in rendered[p][2] for p in moved), moved
        if not moved:
            break
    assert not moved, moved
    assert _hits(lab) - h0 >= len(paths) - 3  # kept: all but the documents with a clock (and a second that ended)
    for path in paths:
        etag = dict(kept[path][1])["ETag"]
        not_modified = _raw(url, path, {"If-None-Match": etag})
        if not_modified[0] == 200:  # a DateTime that moved on
            assert b'"DateTime"' in not_modified[2], path
            continue
        assert not_modified[0] == 304 and dict(not_modified[1])["ETag"] == etag and not_modified[2] == b"", path


def test_power_off_is_seen_and_so_is_its_end(lab: Any) -> None:
    name = "rc-openbmc"
    c = RF(lab.url_of(name))
    sys_path = c.system_path()
    entries = f"{sys_path}/LogServices/{lab.lab.bmc(name).flavour.system_logs[0]}/Entries"
    assert c.get(sys_path)["PowerState"] == "On"
    assert c.get(sys_path)["PowerState"] == "On"  # kept
    logged = c.get(entries)["Members@odata.count"]
    assert c.req("POST", f"{sys_path}/Actions/ComputerSystem.Reset", {"ResetType": "ForceOff"})[0] == 204
    assert c.get(sys_path)["PowerState"] in ("PoweringOff", "Off")
    assert c.get(entries)["Members@odata.count"] == logged + 1
    # No request changes the state when the phase ends: the kept PoweringOff must not outlive it.
    deadline = time.monotonic() + 10
    while c.get(sys_path)["PowerState"] != "Off":
        assert time.monotonic() < deadline, "the System still shows the power phase that ended"
        time.sleep(0.05)
    assert c.req("POST", f"{sys_path}/Actions/ComputerSystem.Reset", {"ResetType": "On"})[0] == 204
    while c.get(sys_path)["PowerState"] != "On":
        assert time.monotonic() < deadline, "the System never showed On again"
        time.sleep(0.05)


def test_a_change_made_in_process_is_seen(lab: Any) -> None:
    name = "rc-dell"
    c = RF(lab.url_of(name))
    sys_path = c.system_path()
    assert c.get(sys_path)["Boot"]["BootSourceOverrideTarget"] == "None"
    bmc = lab.lab.bmc(name)
    lab.call(bmc.set_boot, {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"})
    assert c.get(sys_path)["Boot"]["BootSourceOverrideTarget"] == "Pxe"
    lab.call(bmc.set_boot, {"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled"})
    assert c.get(sys_path)["Boot"]["BootSourceOverrideTarget"] == "None"


def test_a_fault_set_after_a_get_is_seen_at_the_next_get(lab: Any) -> None:
    name = "rc-hpe"
    c = RF(lab.url_of(name))
    chassis = c.chassis_path()
    first = c.req("GET", f"{chassis}/Power")
    assert first[0] == 200 and {p["Status"]["Health"] for p in first[1]["PowerSupplies"]} == {"OK"}
    assert c.req("GET", f"{chassis}/Power")[2]["ETag"] == first[2]["ETag"]  # kept
    lab.set_fault(name, psu_failed=0)
    failed = c.get(f"{chassis}/Power")
    assert failed["PowerSupplies"][0]["Status"]["Health"] == "Critical"
    # the faults that decide a request's fate still do, on a document that is kept
    lab.set_fault(name, error_rate=1.0)
    assert c.req("GET", f"{chassis}/Power")[0] in (500, 503)
    lab.set_fault(name, error_rate=None)
    # a paging fault shapes the document per request: no kept whole collection
    c.get("/redfish/v1/Chassis")
    members = c.get(f"{chassis}/PCIeDevices")["Members"]
    lab.set_fault(name, nextlink_loop=True)
    page = c.get(f"{chassis}/PCIeDevices")
    assert "Members@odata.nextLink" in page
    served = lab.counters(name)["faults_served"]
    assert c.get(f"{chassis}/PCIeDevices") == page
    assert lab.counters(name)["faults_served"] == served + 1  # each page served is counted: none kept
    lab.clear_faults(name)
    assert "Members@odata.nextLink" not in c.get(f"{chassis}/PCIeDevices")
    assert c.get(f"{chassis}/PCIeDevices")["Members"] == members
    assert c.req("GET", f"{chassis}/Power")[2]["ETag"] == first[2]["ETag"]


def test_the_etag_changes_when_the_document_does(lab: Any) -> None:
    name = "rc-ami"
    c = RF(lab.url_of(name))
    sys_path = c.system_path()
    etag = c.req("GET", sys_path)[2]["ETag"]
    assert c.req("GET", sys_path, headers={"If-None-Match": etag})[0] == 304
    assert c.req("PATCH", sys_path, {"AssetTag": "rack-7"})[0] == 200
    status, doc, hdrs = c.req("GET", sys_path, headers={"If-None-Match": etag})
    assert status == 200 and doc["AssetTag"] == "rack-7" and hdrs["ETag"] != etag


def test_the_manager_clock_moves(lab: Any) -> None:
    c = RF(lab.url_of("rc-generic"))
    mgr = c.manager_path()
    first = c.get(mgr)["DateTime"]
    deadline = time.monotonic() + 10
    while c.get(mgr)["DateTime"] == first:  # the next second shows on the next read
        assert time.monotonic() < deadline, "the Manager's DateTime stands still"
        time.sleep(0.1)


def test_logins_keep_the_answers_and_the_sessions_are_always_current(lab: Any) -> None:
    name = "rc-ilo6"
    url = lab.url_of(name)
    c = RF(url)
    sys_path = c.system_path()
    c.get(sys_path)
    status, _, hdrs = c.req("POST", "/redfish/v1/SessionService/Sessions", {"UserName": "admin", "Password": "labpass"})
    assert status == 201
    listed = c.get("/redfish/v1/SessionService/Sessions")["Members"]
    assert {"@odata.id": hdrs["Location"]} in listed
    assert c.req("DELETE", hdrs["Location"])[0] == 204
    assert {"@odata.id": hdrs["Location"]} not in c.get("/redfish/v1/SessionService/Sessions")["Members"]
    h0 = _hits(lab)
    c.get(sys_path)  # a login and a logout (each sweep's) change no kept answer
    assert _hits(lab) == h0 + 1


def test_the_budget_bounds_what_is_kept(tmp_path: Any) -> None:
    for mb, kept in ((0.0, False), (0.002, True)):
        cfg = LabConfig(state_dir=tmp_path / str(mb), tls=False, initial_power="On", render_cache_mb=mb)
        with run_lab_in_thread([_spec("generic")], cfg) as small:
            c = RF(small.url_of("rc-generic"))
            for path in ("/redfish/v1", c.system_path(), c.chassis_path(), c.manager_path(), "/redfish/v1/UpdateService"):
                c.get(path)
                c.get(path)
            stats = small.call(small.lab.render_cache)
            assert stats["bytes"] <= mb * 1024 * 1024
            assert (stats["hits"] > 0) is kept, stats
