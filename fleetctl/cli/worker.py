"""`fleetctl worker --site SITE`: a Temporal worker taking its site's work (docs/scale-out.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import host_port, non_empty, whole


def command(
    site: Annotated[str, typer.Option("--site", help="The site whose BMCs, switches and hosts this machine reaches.", callback=non_empty)],
    temporal: Annotated[
        str | None,
        typer.Option(
            "--temporal", help="Temporal's frontend, HOST:PORT (default: FLEETCTL_TEMPORAL).", metavar="HOST:PORT", callback=host_port
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(
            "--namespace", help="Temporal namespace (default: FLEETCTL_TEMPORAL_NAMESPACE, else default).", callback=non_empty
        )
    ] = None,
    activities: Annotated[int, typer.Option(help="Activities this worker runs at once.", parser=whole(1, 100_000))] = 500,
) -> None:
    """Run a worker of the scale-out engine for one site, until SIGTERM or Ctrl-C.

    It takes the work of its site's task queue (the servers' steps: their BMCs, switches and
    hosts) and of the control queue (jobs and locks in the store). Start several per site to
    share the load and survive the loss of one. The store must be PostgreSQL (FLEETCTL_DB).
    """
    import asyncio

    from fleetctl.cli.output import console
    from fleetctl.config import temporal_address, temporal_namespace
    from fleetctl.errors import InputError
    from fleetctl.scaleout.worker import run_worker

    address = temporal or temporal_address()
    if not address:
        raise InputError("give --temporal HOST:PORT or set FLEETCTL_TEMPORAL", field="--temporal")
    err = console(stderr=True)
    asyncio.run(run_worker(site, address, namespace or temporal_namespace(), activities=activities,
                           ready=lambda text: err.print(text, highlight=False)))  # fmt: skip
