"""A lab is a fleet of its own: the inventory it serves, in a database of its own.

`fleetctl lab up` starts one simulated BMC (and host) per server of a source
inventory (a site file or folder, or the fleet of the selected database) and
the EOS and SONiC switches cabled to them, then writes the inventory it
serves into the lab's own database, ``<lab folder>/fleet.db``: the lab's
addresses, the lab's credential reference (a random password in a mode-0600
file of the lab folder), the lab BMCs' certificate pins, each host's SSH
address and the playbooks' sandbox variables. It prints
``export FLEETCTL_DB=<that database>``; commands run against that database
reach the lab and nothing else, and the source inventory is never changed.
Nothing is swapped at run time: if the lab dies, commands on the lab's
database fail to connect to the lab's addresses. Devices the lab does not
serve (servers left out with ``--server``, switches of a platform the lab does
not speak) stay in the lab's fleet, so that racks, cables and uplinks read as
in the source, but with no BMC URL and no credential, and names under
``.invalid`` (which never resolves) for their addresses: a command on them
fails before it sends anything, and says why.

The site files the lab's database was imported from are kept in
``<lab folder>/site/`` for the operator to read.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable
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
    "nvidia": "nvidia",
    "nvidia corporation": "nvidia",
}

# Newer BMC generations of a vendor, by the hardware model's name (tried before the vendor alone):
# HPE ProLiant Gen11/Gen12 run iLO 6/7, Dell PowerEdge 16G (R660/R760, XE8640/XE9640/XE9680) iDRAC 9 7.x.
FLAVOUR_BY_MODEL: tuple[tuple[str, str, str], ...] = (
    ("hpe", r"\bGen1[12]\b", "ilo6"),
    ("hewlett packard enterprise", r"\bGen1[12]\b", "ilo6"),
    ("dell", r"\b(R[67]60\w*|XE(8640|9640|9680)\w*)\b", "idrac9"),
    ("dell inc.", r"\b(R[67]60\w*|XE(8640|9640|9680)\w*)\b", "idrac9"),
)


def flavour_for(vendor: str | None, model: str | None) -> str:
    """The lab flavour a server of this hardware vendor and model speaks ("generic" when unknown)."""
    v = (vendor or "").strip().lower()
    for vendor_name, model_re, flavour in FLAVOUR_BY_MODEL:
        if v == vendor_name and model and re.search(model_re, model):
            return flavour
    return FLAVOUR_BY_VENDOR.get(v, "generic")


def lab_dir() -> Path:
    return Path(os.environ.get("FLEETCTL_LAB_DIR") or data_dir() / "lab")


def credential_ref(state_dir: Path | None = None) -> str:
    # Absolute: a file: reference is refused otherwise (FLEETCTL_LAB_DIR may be relative).
    return f"file:{((state_dir or lab_dir()) / CREDENTIAL_FILE).absolute()}"


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
            LabBoard(kind=r.kind if r.kind in ("gpu", "amd-instinct") else "mncore2", serial=r.serial, slot=r.slot or 0,
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
                flavour=flavour_for(r.vendor, r.product),
            )  # fmt: skip
        )
    return specs


LAB_DB = "fleet.db"
SITE_DIR = "site"
SNMP_DIR = "snmp"


DB_NOTE = "fleet-db"  # where `lab up --lab-db URL` put the lab's fleet (mode 0600: a URL may hold a password)


def lab_db(state_dir: Path | None = None) -> Path:
    """The lab's own SQLite database (the default home of the lab's fleet)."""
    return (state_dir or lab_dir()) / LAB_DB


def lab_db_url(state_dir: Path | None = None) -> str:
    """Where the lab's fleet is: a URL given to `lab up --lab-db`, or the lab's SQLite file's path."""
    note = (state_dir or lab_dir()) / DB_NOTE
    try:
        return note.read_text().strip() or str(lab_db(state_dir))
    except OSError:
        return str(lab_db(state_dir))


def _fresh_sqlite(path: Path) -> str:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"sqlite:///{path.resolve()}"


def _source_into(url: str, site: Path | None, source_url: str | None, work: Path) -> None:
    """Import the source inventory (site files, or another fleet's export) into ``url``."""
    from fleetctl.inventory.render import write_folder
    from fleetctl.inventory.service import export_inventory, import_path

    if site is not None:
        import_path(site, url=url, reason="lab up: the source inventory")
        return
    folder = work / "source"
    shutil.rmtree(folder, ignore_errors=True)
    write_folder(export_inventory(source_url), folder)
    import_path(folder, url=url, reason="lab up: the source inventory")
    shutil.rmtree(folder, ignore_errors=True)


def up(*, site: Path | None = None, source_url: str | None = None, names: set[str] | None = None, tls: bool = True,
       config: dict[str, Any] | None = None, state_dir: Path | None = None, switches: bool = True,
       switch_config: dict[str, Any] | None = None, port_vlans: str = "default", db_url: str | None = None,
       unregistered: int = 0) -> dict[str, Any]:  # fmt: skip
    """Start a lab for a source inventory and write the fleet it serves into the lab's database.

    Args:
        site: a site file or folder to serve; None: the fleet of ``source_url``
            (None: the selected database, FLEETCTL_DB).
        names: only these servers (and the switches cabled to them).
        switches: serve the EOS and SONiC switches too (fleetctl_lab.switch).
        port_vlans: how server ports start: "default" (unconfigured) or "plan".
        config: LabConfig fields; ``"hosts": False`` serves no hosts.
        db_url: put the lab's fleet in this database (for example a
            PostgreSQL one) instead of the lab's SQLite file; it must be empty.
        unregistered: serve this many BMCs the lab's fleet does not hold
            (:mod:`fleetctl_lab.unregistered`: some planned without a BMC,
            some on a port the plan lacks; leases files in ``leases/``).

    Returns: the lab's status, with ``db`` (the lab database's path) and
    ``source`` (what was served).
    """
    from fleetctl.errors import FleetError, InputError
    from fleetctl.store import get_engine
    from fleetctl_lab.daemon import lab_down, lab_status, lab_up

    sd = (state_dir or lab_dir()).resolve()
    st = lab_status(sd, probe=False)
    if st.get("running"):
        # Before anything is written: a second `lab up` must not change the
        # credential or the database of the lab that runs.
        raise FleetError(f"a lab is already running from {sd} (pid {st.get('pid')}); run `fleetctl lab down` first")
    sd.mkdir(parents=True, exist_ok=True)
    db = lab_db(sd)
    source = source_url or _selected_db()
    if site is None and (source == db_url or (db_url is None and Path(source).resolve() == db.resolve())):
        raise InputError(f"the selected database is the lab's own ({db_url or db}); give --site, or select your fleet's database")
    if db_url is not None:
        _refuse_unless_empty(db_url)
    # The source goes into a scratch database first: the lab's own never
    # holds a real address, not even for a moment.
    scratch = sd / "source.db"
    scratch_url = _fresh_sqlite(scratch)
    from fleetctl_lab import unregistered as unreg_mod

    unreg_mod.clear(sd)
    unreg: Any = None
    try:
        _source_into(scratch_url, site, source_url, sd)
        password = _write_credential(sd)
        with get_engine(scratch_url).connect() as conn:
            specs = specs_from_inventory(conn, password, names)
            sw_specs: list[Any] = []
            if switches and importlib.util.find_spec("asyncssh") is None:
                log.warning("lab: asyncssh is not installed; the lab serves no switches")
            elif switches:
                from fleetctl_lab.switch.inventory import switch_specs_from_inventory

                sw_specs = switch_specs_from_inventory(conn, password, names, port_vlans=port_vlans)  # type: ignore[arg-type]
            if not specs:
                what = f"{site}" if site else "the selected fleet"
                raise InputError(f"{what} has no servers for the lab" + (" of those named" if names else "; import a site first"))
            if unregistered:
                if not sw_specs:
                    raise InputError("--unregistered needs the lab's switches (asyncssh, and an EOS or SONiC management switch)",
                                     field="--unregistered")  # fmt: skip
                unreg = unreg_mod.plan(conn, unregistered, sw_specs)
                specs += unreg_mod.server_specs(unreg, specs[0], password)
        # Each BMC gets its own loopback address on port 8443, like a real OOB
        # network: BMCs in 127.S.0.0/16, hosts in 127.(S+60), switches in 127.(S+100).
        st = _up_in_a_free_range(
            range(10, 40), fixed="base_address" in (config or {}),
            up=lambda s: lab_up(specs, sd, config={"address_mode": "address", "base_address": f"127.{s}.0.1", "tls": tls,
                                                   "hosts": True, **(config or {})},
                                timeout=300, switches=sw_specs or None,
                                switch_config={"base_address": f"127.{s + 100}.0.1", **(switch_config or {})}))  # fmt: skip
        try:
            from fleetctl.inventory.service import export_inventory

            served = lab_fleet(export_inventory(scratch_url), st, sd)
            if unreg is not None:
                unreg_mod.add_to_fleet(served, unreg)
            write_site(served, sd / SITE_DIR)
            import_fleet(sd / SITE_DIR, db, db_url)
            if unreg is not None:
                st = {**st, "unregistered": len(unreg.bmcs), "leases": unreg_mod.write_files(sd, unreg, st.get("servers", {}))}
        except BaseException:
            lab_down(sd)
            raise
    finally:
        from fleetctl.store import reset_engines

        reset_engines()
        _fresh_sqlite(scratch)
        scratch.unlink(missing_ok=True)
    _note_db(sd, db_url)
    return {**st, "db": db_url or str(db), "source": str(site) if site else source}


def _selected_db() -> str:
    """The selected database as a path (SQLite) or URL."""
    from fleetctl.config import database_url

    url = database_url()
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url


def write_site(doc: dict[str, Any], folder: Path) -> None:
    """The lab's fleet as a site file the operator can read (and re-import)."""
    from fleetctl.inventory.render import dump_yaml

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "lab.yaml").write_text("# The fleet this lab serves, written by `fleetctl lab up`.\n" + dump_yaml(doc))


def import_fleet(folder: Path, db: Path, db_url: str | None = None) -> None:
    """The lab's fleet into a fresh lab database (or the empty one given), all or nothing.

    The lab's SQLite file is created mode 0600 before SQLite opens it (its -wal
    and -shm take the file's mode): it names the lab's credential files and
    holds its journal, nobody else's business (issue #25), as a backup is.
    """
    from fleetctl.inventory.service import import_path

    url = db_url
    if url is None:
        url = _fresh_sqlite(db)
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # an empty file is an empty SQLite database
    import_path(folder, url=url, reason="lab up")


def _refuse_unless_empty(url: str) -> None:
    """A lab writes only into a database of its own: refuse one that holds an inventory."""
    from sqlalchemy import func, select

    from fleetctl.errors import InputError
    from fleetctl.inventory.queries import site_t
    from fleetctl.store import get_engine

    with get_engine(url).connect() as conn:
        if conn.execute(select(func.count()).select_from(site_t)).scalar():
            raise InputError("--lab-db: that database already holds an inventory; the lab writes only into an empty one of its own")


def _note_db(sd: Path, db_url: str | None) -> None:
    note = sd / DB_NOTE
    if db_url is None:
        note.unlink(missing_ok=True)
        return
    fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(db_url + "\n")


def _community_ref(sd: Path, switch: str, community: str) -> str:
    """A credential reference whose password is the switch's SNMP community (v2c)."""
    folder = sd / SNMP_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / switch
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"snmp\n{community}\n")
    return f"file:{path.absolute()}"


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


# Where a device the lab does not serve "is": a name that never resolves (RFC 2606).
UNSERVED = "not-served-by-the-lab.invalid"


def _unserved(device: dict[str, Any], *keys: str) -> None:
    for key in keys:
        device.pop(key, None)


def lab_cluster(sd: Path, name: str = "lab") -> dict[str, Any]:
    """The lab's Kubernetes cluster as a site file declares it: the stand-in's kubeconfig (``fleetctl lab k8s up``
    writes it there), by reference. Its nodes are named as the lab's servers, so each server's node is learned."""
    return {"name": name, "kubeconfig": str(sd / "k8s" / "kubeconfig"), "context": "fleetctl-lab"}


def lab_fleet(source: Any, st: dict[str, Any], sd: Path) -> dict[str, Any]:
    """The source inventory as the lab serves it: a site-file document.

    Every device the lab serves gets the lab's address, credential and pin;
    every other one loses its address and credential (see the module
    docstring), so that no real address ever sits in the lab's database.
    """
    from fleetctl.inventory.render import to_document

    doc = to_document(source)
    servers, sws, hosts = st.get("servers", {}), st.get("switches", {}), st.get("hosts", {})
    cred = credential_ref(sd)
    ssh_user = ssh_key = known_hosts = None
    for h in hosts.values():
        ssh_user, ssh_key, known_hosts = h["user"], h["key_file"], h["known_hosts"]
        break
    for site in doc.get("sites", []):
        # A lab never points at a real cluster: each declared one (or one named lab) is the stand-in.
        site["clusters"] = [lab_cluster(sd, c["name"]) for c in site.get("clusters") or [{"name": "lab"}]]
        for rack in site.get("racks", []):
            for srv in rack.get("servers", []):
                srv.pop("node", None)  # the stand-in's nodes are named as the servers
                bmc = servers.get(srv["name"])
                if bmc is None:
                    _unserved(srv, "bmc", "credential", "fingerprint", "system_id", "host_vars")
                    srv["host"] = f"{srv['name']}.{UNSERVED}"
                    continue
                fp = bmc.get("fingerprint")
                srv.update(bmc=bmc["url"], credential=cred, system_id=bmc.get("system_id") or srv.get("system_id"))
                srv.pop("fingerprint", None)
                if fp:
                    srv["fingerprint"] = fp.removeprefix("sha256:")
                host = hosts.get(srv["name"])
                srv.pop("host", None)
                srv.pop("host_vars", None)
                if host:
                    srv["host"] = f"{host['address']}:{host['port']}"
                    srv["host_vars"] = dict(host.get("vars") or {})
                else:
                    srv["host"] = f"{srv['name']}.{UNSERVED}"
            for sw in rack.get("switches", []):
                lab_sw = sws.get(sw["name"])
                if lab_sw is None:
                    _unserved(sw, "credential", "snmp", "ssh_port")
                    sw["address"] = f"{sw['name']}.{UNSERVED}"
                    continue
                host, port = _split(lab_sw["ssh"])
                sw.update(address=host, ssh_port=port, credential=cred)
                sw.pop("snmp", None)
                if lab_sw.get("snmp"):
                    snmp_host, snmp_port = _split(lab_sw["snmp"])
                    if snmp_host != host:  # one management address per switch, as on real ones
                        raise RuntimeError(f"lab switch {sw['name']}: SNMP on {snmp_host}, SSH on {host}")
                    sw["snmp"] = {"version": "2c", "credential": _community_ref(sd, sw["name"], lab_sw["community"]),
                                  "port": snmp_port}  # fmt: skip
        if site.get("provisioning") and ssh_user:
            # The lab's hosts take the lab's key and are checked against its known_hosts.
            site["provisioning"].update(ssh_user=ssh_user, ssh_key=ssh_key, known_hosts=known_hosts)
    return doc


def generated_fleet(specs: list[Any], st: dict[str, Any], sd: Path, per_rack: int = 40) -> dict[str, Any]:
    """A site-file document for generated lab BMCs: one site ``lab``, racks of ``per_rack``."""
    models: dict[tuple[str, str], str] = {}
    racks: list[dict[str, Any]] = []
    cred = credential_ref(sd)
    for i, spec in enumerate(specs):
        key = (spec.manufacturer, spec.model)
        if key not in models:
            models[key] = re.sub(r"[^a-z0-9]+", "-", f"{spec.manufacturer} {spec.model}".lower()).strip("-")
        if i % per_rack == 0:
            racks.append({"name": f"lab-rack-{len(racks) + 1:03d}", "height": per_rack + 2, "servers": []})
        bmc = st["servers"][spec.name]
        srv: dict[str, Any] = {"name": spec.name, "serial": spec.serial, "model": models[key], "position": i % per_rack + 1,
                               "bmc": bmc["url"], "system_id": bmc.get("system_id") or spec.system_id, "credential": cred}  # fmt: skip
        if bmc.get("fingerprint"):
            srv["fingerprint"] = bmc["fingerprint"].removeprefix("sha256:")
        racks[-1]["servers"].append(srv)
    return {
        "models": [{"name": n, "kind": "server", "vendor": v, "model": m, "height": 1} for (v, m), n in models.items()],
        "sites": [{"name": "lab", "description": "generated by fleetctl lab up --generate", "clusters": [lab_cluster(sd)],
                   "racks": racks}],  # fmt: skip
    }


def _up_in_a_free_range(seconds: range, *, fixed: bool, up: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """``up(S)`` with the first /16 ``127.S.0.0`` no other lab holds.

    Another lab (a second user, a parallel test run) may hold a range: its
    addresses refuse to bind, so take the next one. A base address the caller
    fixed is tried alone.
    """
    from fleetctl.errors import FleetError

    last: FleetError | None = None
    for second in seconds:
        try:
            return up(second)
        except FleetError as e:
            if "already in use" not in str(e) or fixed:
                raise
            last = e
    assert last is not None
    raise last


def up_generated(count: int, *, tls: bool = True, config: dict[str, Any] | None = None, state_dir: Path | None = None) -> dict[str, Any]:
    """Start ``count`` generated lab BMCs (MN-Core and GPU servers of every vendor flavour), a fleet of their own."""
    from fleetctl.errors import FleetError, InputError
    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.daemon import lab_down, lab_status, lab_up

    if count < 1:
        raise InputError("--generate takes a positive number", field="--generate")
    sd = (state_dir or lab_dir()).resolve()
    if lab_status(sd, probe=False).get("running"):
        raise FleetError(f"a lab is already running from {sd}; run `fleetctl lab down` first")
    password = _write_credential(sd)
    specs = generate_specs(count, password=password)
    # Generated labs take 127.40.0.0/16 to 127.69.0.0/16 (BMCs only: no hosts, no switches).
    st = _up_in_a_free_range(range(40, 70), fixed="base_address" in (config or {}),
                             up=lambda s: lab_up(specs, sd, config={"address_mode": "address", "base_address": f"127.{s}.0.1",
                                                                    "tls": tls, **(config or {})}, timeout=600))  # fmt: skip
    db = lab_db(sd)
    try:
        write_site(generated_fleet(specs, st, sd), sd / SITE_DIR)
        import_fleet(sd / SITE_DIR, db)
        _note_db(sd, None)
    except BaseException:
        lab_down(sd)
        raise
    finally:
        from fleetctl.store import reset_engines

        reset_engines()
    return {**st, "db": str(db), "source": f"{count} generated servers"}


def down(state_dir: Path | None = None) -> dict[str, Any]:
    from fleetctl_lab.daemon import lab_down

    return lab_down(state_dir or lab_dir())


def status(state_dir: Path | None = None) -> dict[str, Any]:
    from fleetctl_lab.daemon import lab_status

    return lab_status(state_dir or lab_dir())
