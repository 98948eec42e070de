"""``--credential``: log in to each BMC found and read what ``server inspect`` reads, and the BMC's own MACs.

The same driver call as ``fleetctl server inspect`` (``bmc.inventory.facts()``
through the BMC drivers' sweep, found by entry point), on BMCs that are not in
the inventory yet: each target is built from the service root found, its
certificate pinned to the fingerprint the probe saw (a BMC that answers the
login with another certificate is refused, never trusted). One failure is
that BMC's, never the pass's.

The BMC's own MACs (its Managers' EthernetInterfaces) are not among the
driver's facts (those are the system's NICs); they are read here with the
probe's bounded client and HTTP Basic authentication, so that a BMC on a fixed
address (no lease to give its MAC) can still be placed from the switches and
matched by its declared BMC NIC. Paths the BMC links to are followed only
below ``/redfish/v1/``, at most 4 managers and 16 interfaces each.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Sequence
from typing import Any

from fleetctl.discovery.plan import Found, Inspected
from fleetctl.discovery.probe import ProbeFailed, ProbeLimits, client_context, get_json
from fleetctl.inventory.schema import normalise_mac

MAX_MANAGERS = 4
MAX_INTERFACES = 16
# A link a BMC gives is followed only when it is a plain Redfish path (it goes into a request line).
_PATH = re.compile(r"^/redfish/v1/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{1,512}$")


def inspect_found(found: Sequence[Found], credential: str, *, concurrency: int = 64, timeout: float = 30.0) -> None:
    """Fill ``Found.inspected`` of every BMC with a service root (serial, model, maker, NICs, boards, or the error).

    Raises:
        SecretError: the credential reference cannot be resolved (before any login).
    """
    from fleetctl.interfaces.bmc import BMCTarget
    from fleetctl.plugins import sweep
    from fleetctl.secrets import resolve

    cred = resolve(credential)
    todo = [f for f in found if f.root is not None]
    if not todo:
        return
    targets = [
        BMCTarget(name=f.address, url=f.root.url, username=cred.username, password=cred.password,  # type: ignore[union-attr]
                  fingerprint=f.root.fingerprint, timeout=timeout, retries=0)  # type: ignore[union-attr]
        for f in todo
    ]  # fmt: skip

    async def facts(bmc: Any) -> Any:
        return await bmc.inventory.facts()

    results = sweep("bmc", targets, facts, concurrency=concurrency, per_target_timeout=timeout * 4)
    for f, r in zip(todo, results, strict=True):
        if not r.ok:
            f.inspected = Inspected(error=r.error or "failed")
            continue
        v = r.value
        f.inspected = Inspected(
            serial=(v.serial or "").strip() or None, model=(v.model or "").strip() or None,
            manufacturer=(v.manufacturer or "").strip() or None, uuid=v.uuid,
            nics=[(n.name, n.mac) for n in v.nics if n.mac], boards=list(v.boards),
        )  # fmt: skip
        if f.inspected.serial:
            f.sources["serial"] = "inspect"
        if f.inspected.model:
            f.sources["model"] = "inspect"
    auth = "Basic " + base64.b64encode(f"{cred.username}:{cred.password.reveal()}".encode()).decode("ascii")
    macs = asyncio.run(_all_manager_macs(todo, auth, concurrency=concurrency, timeout=timeout))
    for f, found_macs in zip(todo, macs, strict=True):
        if f.inspected is None:  # pragma: no cover - every BMC with a root was inspected above
            f.inspected = Inspected()
        if isinstance(found_macs, str):
            f.inspected.mac_error = found_macs
            continue
        f.inspected.bmc_macs = found_macs
        if f.mac is None and found_macs:
            f.mac = found_macs[0]
            f.sources["mac"] = "inspect (the BMC's EthernetInterfaces)"


async def _all_manager_macs(found: Sequence[Found], authorization: str, *, concurrency: int, timeout: float) -> list[list[str] | str]:
    gate = asyncio.Semaphore(concurrency)
    limits = ProbeLimits(connect_timeout=min(timeout, 10.0), deadline=timeout)
    ctx = client_context()

    async def one(f: Found) -> list[str] | str:
        assert f.root is not None
        async with gate:
            try:
                return await manager_macs(f.root.address, f.root.port, authorization, limits=limits,
                                          ctx=ctx if f.root.url.startswith("https") else None, pinned=f.root.fingerprint)  # fmt: skip
            except ProbeFailed as e:
                return f"EthernetInterfaces: {e.reason}"

    return list(await asyncio.gather(*(one(f) for f in found)))


async def manager_macs(address: str, port: int, authorization: str, *, limits: ProbeLimits, ctx: Any, pinned: str | None) -> list[str]:
    """The MACs of the BMC's enabled interfaces (MACAddress, else PermanentMACAddress), in the BMC's order, once each."""

    async def get(path: str) -> dict[str, Any]:
        doc, _ = await get_json(address, port, path, limits=limits, ctx=ctx, authorization=authorization, pinned=pinned)
        return doc if isinstance(doc, dict) else {}

    def members(doc: dict[str, Any], cap: int) -> list[str]:
        out = []
        for m in doc.get("Members") or []:
            path = m.get("@odata.id") if isinstance(m, dict) else None
            if isinstance(path, str) and _PATH.match(path):
                out.append(path)
        return out[:cap]

    macs: list[str] = []
    for manager in members(await get("/redfish/v1/Managers"), MAX_MANAGERS):
        link = (await get(manager)).get("EthernetInterfaces")
        path = link.get("@odata.id") if isinstance(link, dict) else None
        if not isinstance(path, str) or not _PATH.match(path):
            continue
        for nic_path in members(await get(path), MAX_INTERFACES):
            nic = await get(nic_path)
            if nic.get("InterfaceEnabled") is False:
                continue  # NOTE(HPE iLO 5): the shared network port, disabled, is listed beside the dedicated one
            for key in ("MACAddress", "PermanentMACAddress"):
                value = nic.get(key)
                if isinstance(value, str) and value.strip():
                    try:
                        mac = normalise_mac(value)
                    except ValueError:
                        continue
                    if mac not in macs and mac != "00:00:00:00:00:00":
                        macs.append(mac)
                    break
    return macs
