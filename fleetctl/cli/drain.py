"""The options of every command that drains Kubernetes nodes before it disrupts their servers (docs/kubernetes.md).

One declaration each, so ``burnin``, ``firmware update``, ``provision --restart``
and the power commands spell and check them alike (kubectl drain's names where
it has one).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fleetctl.cli.common import seconds

DAY_S = 86400.0

MaxUnavailableOpt = Annotated[
    str,
    typer.Option("--max-unavailable", help="Nodes of one rack out at once: a count (2) or a percentage of its nodes (5%), counting "
                 "those already cordoned or not Ready."),  # fmt: skip
]
DrainTimeoutOpt = Annotated[
    float,
    typer.Option("--drain-timeout", help="Seconds to drain one node (budgets waited on, pods gone) before it is held cordoned.",
                 callback=seconds(0, DAY_S, above=True)),  # fmt: skip
]
DeleteEmptydirOpt = Annotated[
    bool, typer.Option("--delete-emptydir-data", help="Also evict pods with emptyDir volumes (their data is lost), as kubectl drain.")
]
ForceDrainOpt = Annotated[bool, typer.Option("--force-drain", help="Also evict pods no controller manages (kubectl drain --force).")]


def drain_plan(c: Any, servers: list[str], *, max_unavailable: str, timeout_s: float, delete_emptydir_data: bool,
               force: bool) -> Any:  # fmt: skip
    """The run's drain plan (None: no server is a live node), checked before anything is touched (exit 2 otherwise)."""
    from fleetctl.workflows.maintained import plan_drain

    return plan_drain(c, servers, max_unavailable=max_unavailable, timeout_s=timeout_s, delete_emptydir_data=delete_emptydir_data,
                      force=force)  # fmt: skip
