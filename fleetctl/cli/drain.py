"""The drain options of the described workflows that disrupt servers (burnin, firmware update, provision --reprovision).

The options themselves are declared once, in :mod:`fleetctl.cli.maintain` (the power and RMA commands use them too),
so every command spells and checks them alike (kubectl drain's names where it has one).
"""

from __future__ import annotations

from typing import Any

from fleetctl.cli.maintain import DrainTimeoutOpt, ForceDrainOpt, MaxUnavailableOpt
from fleetctl.cli.maintain import EmptyDirOpt as DeleteEmptydirOpt

__all__ = ["DeleteEmptydirOpt", "DrainTimeoutOpt", "ForceDrainOpt", "MaxUnavailableOpt", "drain_plan"]


def drain_plan(c: Any, servers: list[str], *, max_unavailable: str, timeout_s: float, delete_emptydir_data: bool,
               force: bool) -> Any:  # fmt: skip
    """The run's drain plan (None: no server is a live node), checked before anything is touched (exit 2 otherwise)."""
    from fleetctl.workflows.maintained import plan_drain

    return plan_drain(c, servers, max_unavailable=max_unavailable, timeout_s=timeout_s, delete_emptydir_data=delete_emptydir_data,
                      force=force)  # fmt: skip
