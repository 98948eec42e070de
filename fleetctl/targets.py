"""TARGET arguments: which servers a command acts on, and how to reach their BMCs.

A TARGET is a server name, a rack (``rack-12`` or ``tyo1/rack-12``), a site,
a selector ``state=ready``, ``tag=mncore2``, ``model=mn-server-2`` or
``rack=rack-12``, or ``all``. Several targets add up; duplicates are dropped.
A selector with an empty or unknown value is refused: only ``all`` selects
everything.

Every address, credential reference, certificate pin and driver comes from
the inventory of the database the command runs on, and from nothing else: a
lab is a fleet of its own, with its own database (``fleetctl lab up`` prints
the ``export FLEETCTL_DB=...`` line that selects it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from fleetctl.errors import InputError, NotFound

if TYPE_CHECKING:
    from fleetctl.interfaces.host import HostRef, HostTarget

SELECTORS = ("state", "tag", "model", "rack", "site")


@dataclass(frozen=True)
class ServerRef:
    """What a BMC operation needs to know of a server."""

    id: int
    name: str
    bmc_url: str | None
    system_id: str | None
    credential: str | None
    fingerprint: str | None
    state: str
    rack: str
    driver: str = "redfish"  # the BMC driver, from the hardware model


def resolve(conn: Any, targets: list[str]) -> list[ServerRef]:
    """The servers the TARGET arguments name, in rack order, each once."""
    from fleetctl.inventory.queries import hm_t, list_servers, rack_t, site_t, srv_t

    if not targets:
        raise InputError("give at least one TARGET: a server, a rack, a selector like state=ready, or all")
    names: list[str] = []
    # The servers among plain names, in one query per 500: a sweep's shard names thousands (one query each took 6 s at 5,000).
    plain = [t for t in targets if "=" not in t and t.strip() and t != "all"]
    servers: set[str] = set()
    for i in range(0, len(plain), 500):
        servers.update(conn.execute(select(srv_t.c.name).where(srv_t.c.name.in_(plain[i : i + 500]))).scalars())
    for t in targets:
        key, sep, value = t.partition("=")
        if not t.strip():
            raise InputError("an empty TARGET; name a server, a rack, a site, a selector, or all", field="TARGET")
        if sep:
            if key not in SELECTORS:
                raise InputError(f"unknown selector {key!r} in {t!r} (use {', '.join(SELECTORS)})", field="TARGET")
            rows = list_servers(conn, **{key: value})  # refuses an empty or unknown value
            if not rows:
                raise NotFound(f"no servers match {t!r}")
            names += [r["name"] for r in rows]
        elif t == "all":
            names += [r["name"] for r in list_servers(conn)]
        elif t in servers:
            names.append(t)
        elif conn.execute(select(site_t.c.id).where(site_t.c.name == t)).first():
            names += [r["name"] for r in list_servers(conn, site=t)]
        elif conn.execute(select(rack_t.c.id).where(rack_t.c.name == t.rpartition("/")[2])).first():
            names += [r["name"] for r in list_servers(conn, rack=t)]
        else:
            raise NotFound(f"no server, rack or site named {t!r}")
    seen: dict[str, None] = dict.fromkeys(names)
    rows = conn.execute(
        select(srv_t, rack_t.c.name.label("rack"), hm_t.c.driver.label("model_driver"))
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
        .where(srv_t.c.name.in_(list(seen)))
    )
    by_name = {
        r.name: ServerRef(r.id, r.name, r.bmc_url, r.bmc_system_id, r.credential, r.bmc_fingerprint, r.state, r.rack,
                          r.model_driver or "redfish")  # fmt: skip
        for r in rows
    }
    return [by_name[n] for n in seen if n in by_name]


class Credentials:
    """Credential references resolved once each per command (a cmd: may be slow): one instance given to every
    :func:`bmc_targets` call of a command that builds its targets a chunk at a time (the sweep).

    ``get`` gives the Credential, or the one-line reason it could not be had.
    """

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}

    def get(self, ref: str | None) -> Any:
        from fleetctl.errors import FleetError
        from fleetctl.secrets import resolve as resolve_secret

        if not ref:
            return "no credential reference in the inventory"
        if ref not in self._seen:
            try:
                self._seen[ref] = resolve_secret(ref)
            except FleetError as e:
                self._seen[ref] = str(e)
        return self._seen[ref]


def _limits() -> dict[str, Any]:
    """Per-request timeout and retries, from FLEETCTL_BMC_TIMEOUT / FLEETCTL_BMC_RETRIES.

    The defaults (30 s, 2 retries) suit real BMCs, some of which take 20 s to
    answer a reset; a sweep over known-dead BMCs may want less. A bad value
    (-1, 0, nan, inf, garbage) is refused here, before any BMC is contacted.
    """
    from fleetctl.config import bmc_limits

    return dict(bmc_limits())


def bmc_targets(servers: list[ServerRef], *, creds: Credentials | None = None, **kwargs: Any) -> tuple[list[Any], dict[str, str]]:
    """BMCTargets for the servers, and the servers that cannot be reached, with why.

    Credentials are resolved once per distinct reference (per ``creds``: a new cache when None).
    """
    from fleetctl.interfaces.bmc import BMCTarget

    creds = creds if creds is not None else Credentials()
    limits = _limits()
    targets, unreachable = [], {}
    for s in servers:
        if not s.bmc_url:
            unreachable[s.name] = "no BMC URL in the inventory"
            continue
        cred = creds.get(s.credential)
        if isinstance(cred, str):
            unreachable[s.name] = cred
            continue
        targets.append(
            BMCTarget(name=s.name, url=s.bmc_url, username=cred.username, password=cred.password, system_id=s.system_id,
                      fingerprint=s.fingerprint, trust_on_first_use=s.fingerprint is None, driver=s.driver,
                      **{**limits, **kwargs})  # fmt: skip
        )
    return targets, unreachable


@dataclass(frozen=True)
class SwitchRef:
    """What a switch operation needs to know of a switch."""

    id: int
    name: str
    platform: str
    address: str
    credential: str | None
    role: str
    rack: str
    snmp_version: str | None
    snmp_credential: str | None
    snmp_port: int | None
    ssh_port: int = 22
    driver: str = "netmiko"  # the switch driver, from the hardware model


def resolve_switches(conn: Any, targets: list[str]) -> list[SwitchRef]:
    """Switches named by TARGETs: a switch, a rack or site (its switches), role=leaf, or all."""
    from fleetctl.inventory.queries import hm_t, rack_t, resolve_rack, site_t, sw_t

    if not targets:
        raise InputError("give at least one TARGET: a switch, a rack, a site, role=leaf, or all")
    q = (
        select(sw_t, rack_t.c.name.label("rack"), site_t.c.name.label("site"), hm_t.c.driver.label("model_driver"))
        .join(rack_t, rack_t.c.id == sw_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == sw_t.c.model_id)
    )
    rows = list(conn.execute(q))
    by_name = {r.name: r for r in rows}  # (a shard names hundreds: a scan of every switch for each took 1.6 s at 500)
    picked: dict[str, Any] = {}
    for t in targets:
        key, sep, value = t.partition("=")
        if not t.strip():
            raise InputError("an empty TARGET; name a switch, a rack, a site, a selector, or all", field="TARGET")
        if sep:
            if key not in ("role", "rack", "site", "platform"):
                raise InputError(f"unknown selector {key!r} in {t!r} (use role=, rack=, site=, platform=)", field="TARGET")
            if not value.strip():
                raise InputError(f"{key}= needs a value; an empty one would select every switch (say `all` for that)", field="TARGET")
            hit = [r for r in rows if str(getattr(r, key)) == value]
        elif t == "all":
            hit = rows
        elif t in by_name:
            hit = [by_name[t]]
        elif any(r.site == t for r in rows):
            hit = [r for r in rows if r.site == t]
        else:
            try:
                rack = resolve_rack(conn, t)
            except NotFound:
                raise NotFound(f"no switch, rack or site named {t!r}") from None
            hit = [r for r in rows if r.rack_id == rack.id]
        if not hit:
            raise NotFound(f"no switches match {t!r}")
        for r in hit:
            picked.setdefault(r.name, r)
    return [
        SwitchRef(r.id, r.name, r.platform, r.mgmt_address, r.credential, r.role, r.rack, r.snmp_version, r.snmp_credential,
                  r.snmp_port, r.ssh_port or 22, r.model_driver or "netmiko")  # fmt: skip
        for r in picked.values()
    ]


def switch_targets(switches: list[SwitchRef]) -> tuple[list[Any], dict[str, str]]:
    """SwitchTargets (SSH) for the switches, and those that cannot be reached, with why."""
    from fleetctl.interfaces.switch import SwitchTarget

    creds = Credentials()
    # An SSH session has a timeout and no retries of its own (a switch command
    # is never replayed blindly): FLEETCTL_BMC_RETRIES does not apply.
    limits = {k: v for k, v in _limits().items() if k == "timeout"}
    targets, unreachable = [], {}
    for s in switches:
        cred = creds.get(s.credential)
        if isinstance(cred, str):
            unreachable[s.name] = cred
            continue
        targets.append(SwitchTarget(name=s.name, host=s.address, port=s.ssh_port, platform=s.platform, username=cred.username,
                                    password=cred.password, driver=s.driver, **limits))  # fmt: skip
    return targets, unreachable


def snmp_targets(switches: list[SwitchRef], *, timeout: float | None = None,
                 retries: int | None = None) -> tuple[list[Any], dict[str, str]]:  # fmt: skip
    """SnmpTargets for the switches, and those that cannot be polled, with why.

    ``timeout`` (seconds for one request) and ``retries`` (extra attempts), when
    given, replace the SNMP defaults (2 s, 1), as a sweep's ``--request-timeout``
    and ``--retries`` do.
    """
    from fleetctl.interfaces.snmp import SnmpTarget

    timing: dict[str, Any] = {}
    if timeout is not None:
        timing["timeout"] = timeout
    if retries is not None:
        timing["retries"] = retries
    creds = Credentials()
    targets, unreachable = [], {}
    for s in switches:
        if not s.snmp_credential:
            unreachable[s.name] = "no snmp settings in the inventory"
            continue
        cred = creds.get(s.snmp_credential)
        if isinstance(cred, str):
            unreachable[s.name] = cred
            continue
        if s.snmp_version == "3":
            targets.append(SnmpTarget(name=s.name, host=s.address, port=s.snmp_port or 161, version="3",
                                      user=cred.username, auth_key=cred.password, priv_key=cred.password, **timing))  # fmt: skip
        else:
            targets.append(SnmpTarget(name=s.name, host=s.address, port=s.snmp_port or 161, version="2c", community=cred.password,
                                      **timing))  # fmt: skip
    return targets, unreachable


def host_target(name: str, hostvars: Mapping[str, Any], provisioning: Mapping[str, Any] | None) -> HostTarget:
    """How to reach a server's installed OS (a :class:`~fleetctl.interfaces.host.HostTarget`), as the inventory says.

    The server's ``host`` (``host[:port]``, in the Ansible variables as
    ansible_host/ansible_port) or its name on port 22; the site's SSH user and
    key (``provisioning``: the site's settings, None when it has none). With
    the site's ``known_hosts`` the host key is checked strictly against that
    file; without it, a freshly installed host's new key is accepted (Ansible
    is told to record it in fleetctl's own known_hosts, and checks it from
    then on).
    """
    from fleetctl.config import data_dir
    from fleetctl.interfaces.host import HostTarget

    prov = provisioning or {}
    known = prov.get("known_hosts")
    return HostTarget(name=name, address=str(hostvars.get("ansible_host", name)), port=int(hostvars.get("ansible_port", 22)),
                      user=str(prov.get("ssh_user") or "root"), key_file=prov.get("ssh_key") or None,
                      known_hosts=str(known or data_dir() / "known_hosts"), strict=bool(known))  # fmt: skip


def resolve_hosts(conn: Any, names: list[str]) -> dict[str, HostRef]:
    """The hosts of the named servers (:class:`~fleetctl.interfaces.host.HostRef` by name), in a few queries.

    Each carries its :class:`HostTarget`, the inventory's host variables (the
    accelerator tools' paths and folders) and its model's board kind: what
    burn-in and the sweep's host level need, and nothing of provisioning's
    plan. A name that is not a server is left out.
    """
    from fleetctl.interfaces.host import HostRef
    from fleetctl.inventory.ansible import _hosts
    from fleetctl.inventory.queries import hm_t, rack_t, site_provisioning, site_t, srv_t

    rows = conn.execute(
        select(srv_t.c.name, site_t.c.name.label("site"), hm_t.c.name.label("model"), hm_t.c.board_kind)
        .join(rack_t, rack_t.c.id == srv_t.c.rack_id)
        .join(site_t, site_t.c.id == rack_t.c.site_id)
        .join(hm_t, hm_t.c.id == srv_t.c.model_id)
        .where(srv_t.c.name.in_(names))
    ).all()
    provs: dict[str, Mapping[str, Any] | None] = {}
    hosts = _hosts(conn, servers_only=set(names))
    out: dict[str, HostRef] = {}
    for r in rows:
        if r.site not in provs:
            provs[r.site] = site_provisioning(conn, r.site)
        hv = dict(hosts.get(r.name, {}).get("vars") or {})
        out[r.name] = HostRef(host_target(r.name, hv, provs[r.site]), hv, r.board_kind, r.model)
    return {n: out[n] for n in names if n in out}
