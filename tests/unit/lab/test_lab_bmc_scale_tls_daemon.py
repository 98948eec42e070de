"""HTTPS with per-BMC certificates, a few hundred BMCs in one process, and
the daemon's up/status/down round trip."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import random
import socket
import ssl
import time
import urllib.request
from pathlib import Path

from fleetctl_lab.bmc import LabConfig, generate_specs, run_lab_in_thread
from fleetctl_lab.daemon import lab_down, lab_status, lab_up
from lab_client_helpers import RF


def peer_cert(url: str) -> bytes:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=5) as s, ctx.wrap_socket(s) as t:
        return t.getpeercert(binary_form=True)


def test_each_bmc_has_its_own_cert_and_verifies(tmp_path: Path) -> None:
    specs = generate_specs(3)
    with run_lab_in_thread(specs, LabConfig(state_dir=tmp_path)) as lab:
        fps = set()
        for s in specs:
            url = lab.url_of(s.name)
            assert url.startswith("https://")
            der = peer_cert(url)
            fp = "sha256:" + hashlib.sha256(der).hexdigest()
            assert fp == lab.fingerprint_of(s.name)
            fps.add(fp)
            # The cached PEM verifies the BMC by its IP address (SAN), hostname checked.
            pem = (tmp_path / "certs" / f"{s.name}.pem").read_text()
            cafile = tmp_path / f"{s.name}.crt"
            cafile.write_text(pem[pem.index("-----BEGIN CERTIFICATE-----"):])
            ctx = ssl.create_default_context(cafile=str(cafile))
            with urllib.request.urlopen(url + "/redfish/v1", context=ctx, timeout=5) as r:
                assert json.loads(r.read())["Id"] == "RootService"
        assert len(fps) == 3
        first = {s.name: lab.fingerprint_of(s.name) for s in specs}
    # A restart reuses the cached certificates.
    with run_lab_in_thread(specs, LabConfig(state_dir=tmp_path)) as lab:
        assert {s.name: lab.fingerprint_of(s.name) for s in specs} == first


def test_plain_http_option(tmp_path: Path) -> None:
    with run_lab_in_thread(generate_specs(2), LabConfig(state_dir=tmp_path, tls=False)) as lab:
        url = lab.url_of(lab.names()[0])
        assert url.startswith("http://")
        with urllib.request.urlopen(url + "/redfish/v1", timeout=5) as r:
            assert r.status == 200


def test_250_bmcs_one_process_each_at_its_own_address(tmp_path: Path) -> None:
    n = 250
    specs = generate_specs(n)
    base = f"127.{random.randint(20, 250)}.{random.randint(0, 200)}.1"
    t0 = time.monotonic()
    with run_lab_in_thread(specs, LabConfig(state_dir=tmp_path, address_mode="address", base_address=base, port=18443)) as lab:
        started = time.monotonic() - t0
        assert started < 15, f"250 BMCs took {started:.1f}s to start"
        urls = [lab.url_of(s.name) for s in specs]
        assert len({u.split("//")[1].split(":")[0] for u in urls}) == n  # an address each
        assert all(u.endswith(":18443") for u in urls)

        def system_serial(name: str) -> str:
            c = RF(lab.url_of(name))
            return c.get(c.system_path())["SerialNumber"]

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            serials = list(pool.map(system_serial, [s.name for s in specs]))
        assert serials == [s.serial for s in specs]
        assert len({lab.fingerprint_of(s.name) for s in specs}) == n


def test_daemon_up_status_down(tmp_path: Path) -> None:
    specs = generate_specs(3)
    st = lab_up(specs, tmp_path, config={"power_transition_s": 0.1}, timeout=60)
    try:
        assert st["running"] and st["responding"] and st["count"] == 3
        lab_json = (tmp_path / "lab.json").read_text()
        assert "labpass" not in lab_json and "password" not in lab_json.lower()
        assert oct(os.stat(tmp_path / "spec.json").st_mode & 0o777) == "0o600"
        s0 = specs[0].name
        info = st["servers"][s0]
        assert "sha256:" + hashlib.sha256(peer_cert(info["url"])).hexdigest() == info["fingerprint"]
        c = RF(info["url"])
        sp = c.system_path()
        assert c.req("POST", sp + "/Actions/ComputerSystem.Reset", {"ResetType": "On"})[0] == 204
        with urllib.request.urlopen(st["control_url"] + f"/lab/v1/bmcs/{s0}/counters", timeout=5) as r:
            assert json.loads(r.read())["power_on"] == 1
        # A second lab in the same state dir is refused.
        try:
            lab_up(specs, tmp_path)
            raise AssertionError("second lab_up should fail")
        except Exception as e:  # noqa: BLE001
            assert "already running" in str(e)
    finally:
        down = lab_down(tmp_path)
    assert down["stopped"] and down["pid"] == st["pid"]
    assert not lab_status(tmp_path)["running"]
    assert not (tmp_path / "lab.json").exists()
    assert lab_down(tmp_path) == {"stopped": False, "pid": None}
