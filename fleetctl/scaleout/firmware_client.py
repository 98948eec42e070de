"""`fleetctl firmware update` on Temporal, from the command: the request, the start, the following."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fleetctl.config import database_url
from fleetctl.errors import FleetError, InputError
from fleetctl.inventory.service import actor
from fleetctl.scaleout.client import ENV_HEARTBEAT, Followed, follow
from fleetctl.scaleout.queues import HEARTBEAT_S
from fleetctl.workflows.firmware_campaign import HALT_REASON, WINDOW_REASON


def check_image_base(base: str) -> None:
    """Refuse, before anything is read, an image location the Temporal engine cannot use.

    Raises:
        InputError: a local folder (on this machine only: a worker of another machine could not read it), or a URL with
            a password (the workflow's history keeps its input).
    """
    from urllib.parse import urlsplit

    if not base.startswith(("http://", "https://")):
        raise InputError("with FLEETCTL_TEMPORAL, --image-base must be an http(s) URL the site's workers and BMCs reach "
                         "(a local folder is on this machine only); unset FLEETCTL_TEMPORAL to push from here",
                         field="--image-base")  # fmt: skip
    if urlsplit(base).password is not None:
        raise InputError("with FLEETCTL_TEMPORAL, --image-base must not carry a password: the workflow's history keeps "
                         "its input; give the BMCs a URL without one", field="--image-base")  # fmt: skip


def campaign_request(waves: list[list[str]], options: Any, *, label: str, args: dict[str, Any], threshold: Any,
                     window: str | None, wait: bool) -> dict[str, Any]:  # fmt: skip
    """The parent workflow's input: names, waves, options, who, the report's texts; the store's URL without its password."""
    import os

    from fleetctl.scaleout.activities import store_id

    check_image_base(options.base)
    opts = asdict(options)
    opts["only"] = sorted(options.only) if options.only else None
    return {"names": [n for w in waves for n in w], "waves": waves, "label": label, "args": args, "options": opts,
            "threshold": str(threshold), "window": window, "wait": wait, "actor": actor(), "store": store_id(database_url()),
            "heartbeat_s": float(os.environ.get(ENV_HEARTBEAT) or HEARTBEAT_S),
            "halt_reason": HALT_REASON, "window_reason": WINDOW_REASON}  # fmt: skip


def campaign(req: dict[str, Any], address: str, namespace: str, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Start the campaign's workflow and follow it to its end; its report (rows, failed, halted, stopped), job and workflow id.

    Raises:
        Detached: on Ctrl-C (KeyboardInterrupt), which leaves the workflow running.
    """
    run = Followed("firmware")
    wid = run.wid
    said: list[str | None] = [None]

    async def status(_client: Any, st: dict[str, Any]) -> None:
        if st.get("waiting") and st["waiting"] != said[0]:  # as in process: the wait for the window on stderr
            said[0] = st["waiting"]
            say(st["waiting"])

    try:
        out = follow(run, req, address, namespace, on_status=status)
    except Exception as e:
        from temporalio.client import WorkflowFailureError

        if isinstance(e, WorkflowFailureError):
            raise FleetError(f"the firmware campaign's workflow {wid} failed: {e.cause or e}") from e
        raise
    # Temporal's JSON sorts a dict's keys: put each row's back in the report's order, so the output reads as in process.
    order = ["wave", "server", "component", "from", "to", "after", "result", "message"]
    rows = [{**{k: r[k] for k in order if k in r}, **r} for r in out["rows"]]
    return {**out, "rows": rows, "workflow": wid}
