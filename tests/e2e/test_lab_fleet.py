"""A lab is a fleet of its own: commands go where the selected database says, and nowhere else.

The fleet's BMC and switch sit on loopback ports where a recorder counts
connections; the lab serves the same servers and switches on its own
addresses. With the fleet's database selected while the lab runs, commands
reach the recorders (the fleet), never the lab; with the lab's database
selected they reach the lab, never the recorders; and once the lab daemon
is killed they fail to connect, naming the lab's addresses, with no fallback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from tests_helpers_bmc import counters, lab_db_of, lab_doc  # (path set in conftest)

SITE = """
models:
- {name: box, kind: server, vendor: Preferred Networks, model: MN-Server 2, firmware: {BMC: 2.14.0, BIOS: 1.8.2}}
- {name: tor, kind: switch, vendor: Arista, model: DCS-7050SX3-48YC8, ports: [Ethernet1, Ethernet2]}
sites:
- name: s1
  racks:
  - name: r1
    servers:
    - {name: box-1, serial: BOX1, model: box, position: 1, bmc: "https://127.0.0.1:BMCPORT", credential: "env:FLEET_BMC",
       nics: [{name: eth0, mac: "02:00:00:00:00:01"}]}
    switches:
    - {name: tor-1, model: tor, platform: eos, role: leaf, address: 127.0.0.1, ssh_port: SSHPORT, position: 40,
       credential: "env:FLEET_SW"}
  cabling:
  - {switch: tor-1, port: Ethernet1, server: box-1, nic: eth0, vlans: [100]}
"""


class Recorder:
    """A loopback TCP port that counts who connects, and hangs up."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.sock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture
def fleet(db_url, cli, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    bmc, ssh = Recorder(), Recorder()
    site = tmp_path / "site.yaml"
    site.write_text(SITE.replace("BMCPORT", str(bmc.port)).replace("SSHPORT", str(ssh.port)))
    for prefix in ("FLEET_BMC", "FLEET_SW"):
        monkeypatch.setenv(f"{prefix}_USERNAME", "operator")
        monkeypatch.setenv(f"{prefix}_PASSWORD", "not-the-lab-password")
    monkeypatch.setenv("FLEETCTL_BMC_TIMEOUT", "2")
    monkeypatch.setenv("FLEETCTL_BMC_RETRIES", "0")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("inventory", "import", str(site)).code == 0
    yield bmc, ssh
    bmc.close()
    ssh.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_commands_go_to_the_selected_fleet_only(fleet, cli, db_url, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bmc, ssh = fleet
    r = cli("lab", "up", "--no-hosts", "--power-transition", "0.1")
    assert r.code == 0, r.err
    lab_db = lab_db_of(r.out)
    assert Path(lab_db) == tmp_path / "lab" / "fleet.db" and lab_db != os.environ["FLEETCTL_DB"]
    lab = lab_doc(tmp_path / "lab")
    lab_url = lab["servers"]["box-1"]["url"]
    lab_ssh = lab["switches"]["tor-1"]["ssh"]
    try:
        # The fleet's database selected, a lab running beside it: the fleet's addresses, never the lab's.
        r = cli("power", "status", "box-1", "--output", "json")
        [row] = json.loads(r.out)
        assert r.code == 1 and row["fleet"] == db_url.removeprefix("sqlite:///")
        assert f"127.0.0.1:{bmc.port}" in row["error"] and bmc.hits >= 1
        r = cli("switch", "facts", "tor-1", "--output", "json")
        assert r.code == 1 and f"127.0.0.1:{ssh.port}" in json.loads(r.out)[0]["error"] and ssh.hits >= 1
        assert counters(lab, "box-1")["requests"] == 0
        # The table's first line names the fleet.
        r = cli("power", "status", "box-1")
        assert r.out.splitlines()[0] == f"fleet: {db_url.removeprefix('sqlite:///')} (1 server)"

        # The lab's database selected: the lab, and never the fleet's recorders.
        hits = (bmc.hits, ssh.hits)
        monkeypatch.setenv("FLEETCTL_DB", lab_db)
        r = cli("power", "status", "box-1", "--output", "json")
        assert r.code == 0, r.out
        assert json.loads(r.out)[0]["fleet"] == lab_db and counters(lab, "box-1")["requests"] > 0
        r = cli("switch", "facts", "tor-1", "--output", "json")
        assert r.code == 0, r.out
        assert (bmc.hits, ssh.hits) == hits
        # The fleet's own inventory was only read: no lab address, credential or pin in it.
        monkeypatch.setenv("FLEETCTL_DB", db_url)
        shown = json.loads(cli("server", "show", "box-1", "--output", "json").out)
        assert shown["bmc"] == f"https://127.0.0.1:{bmc.port}" and shown["credential"] == "env:FLEET_BMC"
        assert shown["fingerprint"] is None
        monkeypatch.setenv("FLEETCTL_DB", lab_db)

        # The lab daemon dies: commands on its database fail to connect to its addresses, no fallback.
        os.kill(lab["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(lab["pid"], 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        r = cli("power", "status", "box-1", "--output", "json")
        [row] = json.loads(r.out)
        # (Another lab started meanwhile may hold the dead one's address: the pin refuses it.)
        assert r.code == 1 and lab_url.removeprefix("https://") in row["error"], row
        assert "cannot connect" in row["error"] or "does not match the pin" in row["error"], row
        r = cli("switch", "facts", "tor-1", "--output", "json")
        assert r.code == 1 and lab_ssh in json.loads(r.out)[0]["error"]
        assert (bmc.hits, ssh.hits) == hits
    finally:
        cli("lab", "down")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_lab_up_refuses_its_own_database_as_source(fleet, cli, db_url, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    r = cli("lab", "up", "--no-hosts")
    assert r.code == 0, r.err
    try:
        assert cli("lab", "up", "--no-hosts").code == 1  # one lab per folder
    finally:
        assert cli("lab", "down").code == 0
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / "lab" / "fleet.db"))
    r = cli("lab", "up", "--no-hosts")
    assert r.code == 2 and "the lab's own" in r.err
