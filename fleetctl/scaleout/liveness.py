"""The Temporal engine's answer to "does this lock's holder still run": registered with :mod:`fleetctl.holders` on import.

A run on Temporal holds its servers' locks as ``user:temporal:WORKFLOW``; the
lock and the store ask :meth:`fleetctl.holders.Holder.alive`, which asks the
check registered here. This module is cheap to import (the SDK is imported
only when a holder is asked about), so the CLI's wiring imports it at start-up
(:mod:`fleetctl.cli.app`): a command that never touches Temporal can still
judge a lock a Temporal run left. The worker imports it too.
Not imported by the workflows, which the sandbox re-imports.
"""

from __future__ import annotations

from fleetctl.holders import TEMPORAL, register_liveness


def workflow_running(workflow_id: str) -> bool | None:
    """:func:`fleetctl.scaleout.client.workflow_running`, imported when first asked (asyncio and the SDK are not
    for ``fleetctl --help``)."""
    from fleetctl.scaleout.client import workflow_running as ask

    return ask(workflow_id)


register_liveness(TEMPORAL, workflow_running)
