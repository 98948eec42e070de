"""`fleetctl burnin` on Temporal, from the command: start the ``fleetctl.burnin`` workflow and follow it.

The command plans as in process (every refusal before anything is touched,
exit 2), then hands the run to the workers; what it reports comes back as the
in-process run's :class:`~fleetctl.burnin.engine.RunResult`, so the table, the
JSON document and the exit code are the same.
"""

from __future__ import annotations

import os
from typing import Any

from fleetctl.burnin.engine import RunResult, sort_results, stored_results
from fleetctl.burnin.verdict import worst
from fleetctl.config import database_url
from fleetctl.errors import FleetError, InputError, Locked
from fleetctl.inventory.service import actor
from fleetctl.scaleout.client import ENV_HEARTBEAT, Followed, follow
from fleetctl.scaleout.queues import HEARTBEAT_S
from fleetctl.store import get_engine


def request(p: Any, *, restart: bool, concurrency: int) -> dict[str, Any]:
    """The parent workflow's input: names, options, the criteria (thresholds), who; the store's URL without its password.

    Nothing here is secret: the SSH keys, endpoints and BMC credentials are
    read by the workers from the inventory (the activities plan each server
    again there).
    """
    from fleetctl.scaleout.activities import store_id

    job = p.servers[0].job  # grace, interval and force are the run's, the same on each server's job
    return {"names": [s.name for s in p.servers], "kind": p.kind, "level": p.level, "seconds": p.seconds, "grace": job.grace,
            "interval": job.interval, "force": job.force, "criteria": p.criteria.model_dump(mode="json"), "selector": p.selector,
            "restart": restart, "concurrency": concurrency, "actor": actor(), "store": store_id(database_url()),
            "heartbeat_s": float(os.environ.get(ENV_HEARTBEAT) or HEARTBEAT_S)}  # fmt: skip


def run(p: Any, *, restart: bool, concurrency: int, address: str, namespace: str, progress: Any = None) -> Any:
    """Start the burn-in as a workflow and follow it to its end; the engine's ``RunResult``.

    ``progress(server, stage, details)`` is called as in process: ``running``
    when a server's child workflow starts, ``done`` with its verdict and boards.

    Raises:
        Detached: on Ctrl-C (KeyboardInterrupt), which leaves the workflow running.
        Locked: a server another workflow holds (nothing was touched).
        InputError: a worker refused the plan (a server changed since the command planned it, a credential missing there).
    """
    req = request(p, restart=restart, concurrency=concurrency)
    run = Followed("burnin")
    wid = run.wid
    seen: dict[str, tuple[str, Any]] = {}

    def report(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            key = (r["stage"], r.get("verdict"))
            if progress is None or seen.get(r["server"]) == key:
                continue
            seen[r["server"]] = key
            if r["stage"] == "running":
                progress(r["server"], "running", {})
            elif r["stage"] == "done":
                progress(r["server"], "done", {"verdict": r.get("verdict"), "boards": r.get("boards") or {}, "error": r.get("error"),
                                               "resumed": r.get("resumed", False)})  # fmt: skip

    async def status(_client: Any, st: dict[str, Any]) -> None:
        report(st.get("servers", []))

    try:
        out = follow(run, req, address, namespace, on_status=status)
    except Exception as e:
        from temporalio.client import WorkflowFailureError

        if isinstance(e, WorkflowFailureError):
            from temporalio.exceptions import CancelledError

            if isinstance(e.cause, CancelledError):  # `temporal workflow cancel`: the parent closed the run as interrupted
                raise FleetError(f"the burn-in workflow {wid} was cancelled: its run is interrupted; a later `fleetctl burnin` "
                                 "of the same kind, level and duration resumes it") from e  # fmt: skip
            raise FleetError(f"the burn-in workflow {wid} failed: {e.cause or e}") from e
        raise
    if out.get("refused"):
        raise (Locked if out.get("error") == "locked" else InputError)(out["refused"])
    # The boards, with their reasons and metrics, from the store the workers wrote (the workflow's result is a summary).

    boards = stored_results(get_engine(database_url()), int(out["run"]), set(req["names"]))
    for b in boards:
        b.resumed = b.server in out["earlier"]  # stored by an earlier pass of the run, as in process; the rest by this one
    sort_results(boards, req["names"])
    if progress is not None:  # the last states (the poll may have missed the end)
        for name in dict.fromkeys(b.server for b in boards):
            got = [x for x in boards if x.server == name]
            if seen.get(name, ("",))[0] != "done":
                progress(name, "done", {"verdict": worst([x.verdict for x in got]), "boards": {x.device: x.verdict for x in got}})
    return RunResult(int(out["run"]), bool(out["resumed"]), boards, float(out["workload_s"]), float(out["elapsed_s"]), list(out["rma"]),
                     list(out["to_maintenance"]), {k: list(v) for k, v in out["notes"].items()})  # fmt: skip
