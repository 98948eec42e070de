"""The provisioning preflight on Temporal: run on a worker of each site the run involves, before anything starts.

In process, ``fleetctl provision`` checks every credential and setting it will
need before it touches the first device (:mod:`fleetctl.preflight`). On
Temporal the credentials are resolved on the site workers (each has its own
environment, files and owner-only secrets configuration: docs/security.md),
so that is where they must be checked: the parent workflow runs this activity
on each involved site's queue before it opens the job, locks anything or
starts a child, and refuses the whole run when any site reports a problem.

The problems come back as data (``{"what", "who"}``), never the secrets read
(they are dropped at once, as in process); the command raises the same
:class:`~fleetctl.preflight.PreflightError` from them, one line and exit 2.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from fleetctl.preflight import Preflight, PreflightError, for_provision

# The error type the parent workflow fails with when a site reported problems; the command maps it to a PreflightError.
REFUSED = "PreflightRefused"


@activity.defn(name="fleetctl.provision.preflight")
async def preflight(req: dict[str, Any]) -> list[dict[str, Any]]:
    """The problems of ``req["servers"]`` (one site's) as this worker sees them; [] when none."""
    return await asyncio.to_thread(_check, req)


def _check(req: dict[str, Any]) -> list[dict[str, Any]]:
    from fleetctl.scaleout.activities import loaded_provisioner

    names: list[str] = req["servers"]
    p = loaded_provisioner(req, names)
    with p.engine.connect() as conn:
        # As in process: the servers the run will skip or refuse (ready, in service without --reprovision, RMA) are
        # not checked, and a missing one is left to the run's own refusals.
        refused = p._refusals()
        pf = for_provision(conn, [p.ctx[n] for n in names if n in p.ctx and n not in refused])
    return [{"what": pr.what, "who": list(pr.who)} for pr in pf.problems]


def refusal(reports: list[list[dict[str, Any]]]) -> PreflightError | None:
    """The PreflightError the sites' reports make (a problem found on several sites is one, naming them all); None: none."""
    pf = Preflight("provision")
    for report in reports:
        for pr in report:
            for who in pr.get("who") or [""]:
                pf.add(who, str(pr["what"]))
    return PreflightError("provision", pf.problems) if pf.problems else None
