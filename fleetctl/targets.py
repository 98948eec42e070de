"""TARGET arguments: which servers a command acts on, and how to reach their BMCs.

A TARGET is a server name, a rack (``rack-12`` or ``tyo1/rack-12``), a site,
a selector ``state=ready``, ``tag=mncore2``, ``model=mn-server-2`` or
``rack=rack-12``, or ``all``. Several targets add up; duplicates are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from fleetctl.errors import InputError, NotFound

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


def resolve(conn: Any, targets: list[str]) -> list[ServerRef]:
    """The servers the TARGET arguments name, in rack order, each once."""
    from fleetctl.inventory.queries import list_servers, rack_t, site_t, srv_t

    if not targets:
        raise InputError("give at least one TARGET: a server, a rack, a selector like state=ready, or all")
    names: list[str] = []
    for t in targets:
        key, sep, value = t.partition("=")
        if sep:
            if key not in SELECTORS:
                raise InputError(f"unknown selector {key!r} in {t!r} (use {', '.join(SELECTORS)})", field="TARGET")
            rows = list_servers(conn, **{key: value})
            if not rows:
                raise NotFound(f"no servers match {t!r}")
            names += [r["name"] for r in rows]
        elif t == "all":
            names += [r["name"] for r in list_servers(conn)]
        elif conn.execute(select(srv_t.c.id).where(srv_t.c.name == t)).first():
            names.append(t)
        elif conn.execute(select(site_t.c.id).where(site_t.c.name == t)).first():
            names += [r["name"] for r in list_servers(conn, site=t)]
        elif conn.execute(select(rack_t.c.id).where(rack_t.c.name == t.rpartition("/")[2])).first():
            names += [r["name"] for r in list_servers(conn, rack=t)]
        else:
            raise NotFound(f"no server, rack or site named {t!r}")
    seen: dict[str, None] = dict.fromkeys(names)
    rows = conn.execute(
        select(srv_t, rack_t.c.name.label("rack")).join(rack_t, rack_t.c.id == srv_t.c.rack_id).where(srv_t.c.name.in_(list(seen)))
    )
    by_name = {
        r.name: ServerRef(r.id, r.name, r.bmc_url, r.bmc_system_id, r.credential, r.bmc_fingerprint, r.state, r.rack)
        for r in rows
    }
    return [by_name[n] for n in seen if n in by_name]


def _limits() -> dict[str, Any]:
    """Per-request timeout and retries, from FLEETCTL_BMC_TIMEOUT / FLEETCTL_BMC_RETRIES.

    The defaults (30 s, 2 retries) suit real BMCs, some of which take 20 s to
    answer a reset; a sweep over known-dead BMCs may want less.
    """
    import os

    out: dict[str, Any] = {}
    for env, key, kind in (("FLEETCTL_BMC_TIMEOUT", "timeout", float), ("FLEETCTL_BMC_RETRIES", "retries", int)):
        raw = os.environ.get(env)
        if raw:
            try:
                out[key] = kind(raw)
            except ValueError:
                raise InputError(f"{env}={raw!r} is not a number") from None
    return out


def bmc_targets(servers: list[ServerRef], **kwargs: Any) -> tuple[list[Any], dict[str, str]]:
    """BMCTargets for the servers, and the servers that cannot be reached, with why.

    Credentials are resolved once per distinct reference. A running lab
    (``fleetctl lab up``) stands in for the real BMCs of the servers it serves.
    """
    from fleetctl.errors import FleetError
    from fleetctl.interfaces.bmc import BMCTarget
    from fleetctl.lab.inventory import credential_ref, overlay
    from fleetctl.secrets import resolve as resolve_secret

    lab = overlay()
    creds: dict[str, Any] = {}
    targets, unreachable = [], {}
    for s in servers:
        url, ref, pin, system_id = s.bmc_url, s.credential, s.fingerprint, s.system_id
        if s.name in lab:
            # The lab BMC stands in for the real one: its address, the lab's
            # credential and the lab's certificate. Nothing of the lab is pinned
            # into the inventory, which keeps the real BMC's pin (or none).
            url, ref = lab[s.name]["url"], credential_ref()
            pin = lab[s.name].get("fingerprint") or None
            system_id = lab[s.name].get("system_id") or system_id
        if not url:
            unreachable[s.name] = "no BMC URL in the inventory"
            continue
        if not ref:
            unreachable[s.name] = "no credential reference in the inventory"
            continue
        if ref not in creds:
            try:
                creds[ref] = resolve_secret(ref)
            except FleetError as e:
                creds[ref] = e
        cred = creds[ref]
        if isinstance(cred, Exception):
            unreachable[s.name] = str(cred)
            continue
        targets.append(
            BMCTarget(name=s.name, url=url, username=cred.username, password=cred.password, system_id=system_id,
                      fingerprint=pin, trust_on_first_use=pin is None, **{**_limits(), **kwargs})  # fmt: skip
        )
    return targets, unreachable
