"""The lab seen from the inventory: specs for every server, and the overlay.

`fleetctl lab up` starts one simulated BMC per server of the inventory. The
inventory keeps the real BMC addresses (10.x in the example site); while a
lab runs, :func:`overlay` tells the target resolver to reach each server's
BMC at its lab address instead, logging in with the lab's own credential
(a random password in a mode-0600 file of the lab's state folder). Nothing in
the inventory is rewritten, so `lab down` leaves it as it was.
:func:`host_overlay` does the same for the host behind each BMC (its SSH
address, login and the playbooks' sandbox variables; ``fleetctl_lab.hosts``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from sqlalchemy import select

from fleetctl.config import data_dir

CREDENTIAL_FILE = "credential"
log = logging.getLogger("fleetctl_lab")

# Which Redfish dialect a lab BMC speaks, by the hardware model's vendor.
FLAVOUR_BY_VENDOR = {
    "hpe": "hpe",
    "hewlett packard enterprise": "hpe",
    "dell": "dell",
    "dell inc.": "dell",
    "supermicro": "ami",
    "gigabyte": "ami",
    "preferred networks": "openbmc",
}


def lab_dir() -> Path:
    return Path(os.environ.get("FLEETCTL_LAB_DIR") or data_dir() / "lab")


def credential_ref(state_dir: Path | None = None) -> str:
    return f"file:{(state_dir or lab_dir()) / CREDENTIAL_FILE}"


def _write_credential(state_dir: Path) -> str:
    state_dir.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    path = state_dir / CREDENTIAL_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"admin\n{password}\n")
    return password


def specs_from_inventory(conn: Any, password: str, names: set[str] | None = None) -> list[Any]:
    """One LabServerSpec per server: its serial, NICs, boards and firmware baseline."""
    from fleetctl.inventory.queries import board_t, fb_t, hm_t, nic_t, srv_t
    from fleetctl_lab.bmc.spec import LabBoard, LabNic, LabServerSpec

    baseline: dict[int, dict[str, str]] = {}
    for r in conn.execute(select(fb_t)):
        baseline.setdefault(r.model_id, {})[r.component] = r.version
    nics: dict[int, list[Any]] = {}
    for r in conn.execute(select(nic_t)):
        if r.mac:
            nics.setdefault(r.server_id, []).append(LabNic(name=r.name, mac=r.mac))
    boards: dict[int, list[Any]] = {}
    for r in conn.execute(select(board_t)):
        if r.server_id is None:
            continue
        boards.setdefault(r.server_id, []).append(
            LabBoard(kind="gpu" if r.kind == "gpu" else "mncore2", serial=r.serial, slot=r.slot or 0,
                     pci_address=r.pci_address or "", model=r.model or "", firmware=dict(r.firmware or {}))  # fmt: skip
        )
    specs = []
    q = select(srv_t, hm_t.c.vendor, hm_t.c.model.label("product"), hm_t.c.power_idle_w, hm_t.c.power_peak_w).join(
        hm_t, hm_t.c.id == srv_t.c.model_id
    )
    for r in conn.execute(q):
        if names is not None and r.name not in names:
            continue
        fw = baseline.get(r.model_id, {})
        specs.append(
            LabServerSpec(
                name=r.name, serial=r.serial, model=r.product, manufacturer=r.vendor,
                system_id=r.bmc_system_id or "", username="admin", password=password,
                nics=nics.get(r.id, []), boards=sorted(boards.get(r.id, []), key=lambda b: b.slot),
                firmware={k: v for k, v in fw.items() if k in ("BMC", "BIOS")} or {"BMC": "1.0.0", "BIOS": "1.0"},
                power_watts_idle=r.power_idle_w, power_watts_peak=r.power_peak_w,
                flavour=FLAVOUR_BY_VENDOR.get((r.vendor or "").lower(), "generic"),
            )  # fmt: skip
        )
    return specs


def up(*, url: str | None = None, names: set[str] | None = None, tls: bool = True, config: dict[str, Any] | None = None,
       state_dir: Path | None = None, switches: bool = True, switch_config: dict[str, Any] | None = None,
       port_vlans: str = "default") -> dict[str, Any]:  # fmt: skip
    """Start a lab BMC for every server of the inventory (or those named).

    With ``switches`` (the default) the lab also serves every EOS and SONiC
    switch of the inventory (or those cabled to the named servers) over SSH
    and SNMP; see ``fleetctl_lab.switch``. ``port_vlans`` says how server
    ports start: "default" (unconfigured) or "plan". Each server's host
    (``fleetctl_lab.hosts``) is served over SSH unless ``config`` has
    ``"hosts": False``.
    """
    from fleetctl.errors import InputError
    from fleetctl_lab.daemon import lab_up
    from fleetctl.store import get_engine

    sd = state_dir or lab_dir()
    from fleetctl.errors import FleetError as _FleetError
    from fleetctl_lab.daemon import lab_status

    st = lab_status(sd, probe=False)
    if st.get("running"):
        # Before anything is written: a second `lab up` must not change the
        # credential of the lab that runs.
        raise _FleetError(f"a lab is already running from {sd} (pid {st.get('pid')}); run `fleetctl lab down` first")
    password = _write_credential(sd)
    with get_engine(url).connect() as conn:
        specs = specs_from_inventory(conn, password, names)
        sw_specs: list[Any] = []
        if switches and importlib.util.find_spec("asyncssh") is None:
            log.warning("lab: asyncssh is not installed; the lab serves no switches")
        elif switches:
            from fleetctl_lab.switch.inventory import switch_specs_from_inventory

            sw_specs = switch_specs_from_inventory(conn, password, names, port_vlans=port_vlans)  # type: ignore[arg-type]
    if not specs:
        raise InputError("the inventory has no servers for the lab; import a site first (fleetctl inventory import)")
    from fleetctl.errors import FleetError

    # Each BMC gets its own loopback address on port 8443, like a real OOB
    # network. Another lab (a second user, a test run) may hold a range:
    # take the next /16 of 127.0.0.0/8 then.
    last: FleetError | None = None
    for second in range(10, 40):
        cfg = {"address_mode": "address", "base_address": f"127.{second}.0.1", "tls": tls, "hosts": True, **(config or {})}
        sw_cfg = {"base_address": f"127.{second + 100}.0.1", **(switch_config or {})}
        try:
            return lab_up(specs, sd, config=cfg, timeout=300, switches=sw_specs or None, switch_config=sw_cfg)
        except FleetError as e:
            if "already in use" not in str(e) or "base_address" in (config or {}):
                raise
            last = e
    raise last  # type: ignore[misc]


def up_generated(count: int, *, tls: bool = True, config: dict[str, Any] | None = None, state_dir: Path | None = None) -> dict[str, Any]:
    """Start ``count`` generated lab BMCs (MN-Core and GPU servers of every vendor flavour)."""
    from fleetctl.errors import FleetError, InputError
    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.daemon import lab_status, lab_up

    if count < 1:
        raise InputError("--generate takes a positive number", field="--generate")
    sd = state_dir or lab_dir()
    if lab_status(sd, probe=False).get("running"):
        raise FleetError(f"a lab is already running from {sd}; run `fleetctl lab down` first")
    password = _write_credential(sd)
    cfg = {"address_mode": "address", "base_address": "127.40.0.1", "tls": tls, **(config or {})}
    return lab_up(generate_specs(count, password=password), sd, config=cfg, timeout=600)


def down(state_dir: Path | None = None) -> dict[str, Any]:
    from fleetctl_lab.daemon import lab_down

    return lab_down(state_dir or lab_dir())


def status(state_dir: Path | None = None) -> dict[str, Any]:
    from fleetctl_lab.daemon import lab_status

    return lab_status(state_dir or lab_dir())


def _running_section(section: str, state_dir: Path | None) -> dict[str, dict[str, Any]]:
    """One section of a running lab's lab.json ({} when no lab runs); cheap when none exists."""
    sd = state_dir or lab_dir()
    if not (sd / "lab.json").exists():
        return {}
    from fleetctl_lab.daemon import lab_status

    st = lab_status(sd, probe=False)
    return st.get(section, {}) if st.get("running") else {}


def overlay(state_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """{server name: {url, fingerprint}} of a running lab, or {}."""
    return _running_section("servers", state_dir)


def switch_overlay(state_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """{switch name: {ssh, snmp, community, platform}} of a running lab, or {}."""
    return _running_section("switches", state_dir)


def host_overlay(state_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """{server name: {address, port, user, key_file, known_hosts, dir, boards, vars}} of a
    running lab's hosts, or {}. ``fleetctl_lab.hosts.ansible_host_vars(entry)`` turns an
    entry into Ansible host variables (SSH connection + the playbooks' sandbox variables).
    """
    return _running_section("hosts", state_dir)
