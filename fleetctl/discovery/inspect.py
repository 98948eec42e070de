"""``--credential``: log in to each BMC found and read what ``server inspect`` reads.

The same driver call as ``fleetctl server inspect`` (``bmc.inventory.facts()``
through the BMC drivers' sweep, found by entry point), on BMCs that are not in
the inventory yet: each target is built from the service root found, its
certificate pinned to the fingerprint the probe saw (a BMC that answers the
login with another certificate is refused, never trusted). One failure is
that BMC's, never the pass's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetctl.discovery.plan import Found, Inspected


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
