"""Reaching Temporal from a command: the store check, connecting, starting and following a run."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fleetctl.config import database_url, temporal_address, temporal_namespace
from fleetctl.errors import FleetError, InputError
from fleetctl.scaleout.queues import CONTROL_QUEUE, HEARTBEAT_S

# The default heartbeat of long activities (seconds); FLEETCTL_TEMPORAL_HEARTBEAT shortens it (tests).
ENV_HEARTBEAT = "FLEETCTL_TEMPORAL_HEARTBEAT"


def check_store(url: str) -> None:
    """Refuse SQLite: with Temporal, the workers of every site and the commands share one PostgreSQL store."""
    if url.startswith("sqlite"):
        raise InputError(
            "the Temporal engine (FLEETCTL_TEMPORAL) needs the store on PostgreSQL: commands and the workers of every "
            "site share it, and a SQLite file is one machine's. Point FLEETCTL_DB at a postgresql+psycopg:// URL, "
            "or unset FLEETCTL_TEMPORAL to run in process"
        )


# mTLS to Temporal's frontend (production): the client's certificate and key, and the CA of the server's certificate.
ENV_TLS_CERT = "FLEETCTL_TEMPORAL_TLS_CERT"
ENV_TLS_KEY = "FLEETCTL_TEMPORAL_TLS_KEY"
ENV_TLS_CA = "FLEETCTL_TEMPORAL_TLS_CA"


def tls_config() -> Any:
    """The TLS settings from FLEETCTL_TEMPORAL_TLS_CERT / _KEY / _CA (files); False: plain (a dev server on loopback)."""
    import os
    from pathlib import Path

    cert, key, ca = (os.environ.get(v, "").strip() for v in (ENV_TLS_CERT, ENV_TLS_KEY, ENV_TLS_CA))
    if not (cert or key or ca):
        return False
    if bool(cert) != bool(key):
        raise InputError(f"give both {ENV_TLS_CERT} and {ENV_TLS_KEY} (mTLS), or neither")
    from temporalio.service import TLSConfig

    def read(path: str) -> bytes:
        try:
            return Path(path).expanduser().read_bytes()
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror}") from e

    return TLSConfig(client_cert=read(cert) if cert else None, client_private_key=read(key) if key else None,
                     server_root_ca_cert=read(ca) if ca else None)  # fmt: skip


_runtime: list[Any] = []


def runtime() -> Any:
    """The SDK's runtime, its core's log lines sent to Python's logging (stderr), never to stdout (JSON output goes there)."""
    if not _runtime:
        import logging

        from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

        log = LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                            forwarding=LogForwardingConfig(logger=logging.getLogger("fleetctl.temporal")))  # fmt: skip
        _runtime.append(Runtime(telemetry=TelemetryConfig(logging=log)))
    return _runtime[0]


async def connect(address: str, namespace: str) -> Any:
    """A Temporal client (mTLS when configured); a clear error when the server does not answer."""
    from temporalio.client import Client

    tls = tls_config()
    try:
        return await Client.connect(address, namespace=namespace, tls=tls, runtime=runtime())
    except RuntimeError as e:  # the SDK's core reports a refused or unreachable frontend as RuntimeError
        raise FleetError(f"cannot reach Temporal at {address} (namespace {namespace}): {e}") from e


class Detached(Exception):
    """Ctrl-C while following a run: the run goes on, on the workers."""

    def __init__(self, workflow_id: str, job: int | None) -> None:
        super().__init__(workflow_id)
        self.workflow_id = workflow_id
        self.job = job

    def message(self, then: str = "") -> str:
        """What the command says as it leaves the run to the workers; ``then``: a further command to read its results."""
        which = f"job {self.job}" if self.job is not None else f"workflow {self.workflow_id}"
        return (f"detached: {which} goes on on the workers (Temporal workflow {self.workflow_id}); follow it with "
                f"`fleetctl jobs show {self.job if self.job is not None else 'JOB'}`" + (f", then `{then}`" if then else ""))  # fmt: skip


@dataclass
class Followed:
    """A workflow a command started and follows: its id, and its job once a worker has opened it."""

    kind: str
    wid: str = ""
    job: int | None = None
    workflow_type: str = ""  # the workflow started (default ``fleetctl.<kind>``)

    def __post_init__(self) -> None:
        self.wid = self.wid or f"fleetctl-{self.kind}-{uuid.uuid4().hex[:12]}"


def follow(run: Followed, req: Any, address: str, namespace: str, *,
           on_status: Callable[[Any, dict[str, Any]], Awaitable[None]] | None = None) -> dict[str, Any]:  # fmt: skip
    """Start the parent workflow (``run.workflow_type``, or ``fleetctl.<run.kind>``) with ``req`` and follow it to its end; its result.

    Every second the parent's ``status`` query gives the job (``run.job``) and
    goes to ``on_status(client, status)``. A lost connection (the server
    restarting) is followed again. The workflow's own failure comes out as
    temporalio's ``WorkflowFailureError``, for the command to word.

    Raises:
        Detached: on Ctrl-C (KeyboardInterrupt), which leaves the workflow running.
    """

    async def go() -> dict[str, Any]:
        from temporalio.service import RPCError

        client = await connect(address, namespace)
        handle = await client.start_workflow(run.workflow_type or f"fleetctl.{run.kind}", req, id=run.wid, task_queue=CONTROL_QUEUE)
        result = asyncio.ensure_future(handle.result())
        while True:
            await asyncio.wait([result], timeout=1.0)
            if result.done():
                if isinstance(result.exception(), RPCError):  # the server restarts, or the network drops: follow again
                    await asyncio.sleep(1.0)
                    result = asyncio.ensure_future(handle.result())
                    continue
                break
            try:
                status = await handle.query("status")
            except Exception:  # noqa: BLE001 - no worker has taken the workflow yet: nothing to show
                continue
            run.job = status.get("job")
            if on_status is not None:
                await on_status(client, status)
        return dict(result.result())

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        raise Detached(run.wid, run.job) from None


def described_call(name: str, request: Any) -> Any:
    """The generic parent workflow's input (``fleetctl.run``): the description's name, its request as JSON values (no secret:
    the descriptions carry none), the store's URL without its password, the heartbeat of long units."""
    import os

    from fleetctl.scaleout.activities import store_id
    from fleetctl.scaleout.run_wf import RunCall
    from fleetctl.workflows.describe import described, plain

    desc = described(name)
    return RunCall(name, plain(request, desc.request_type), store_id(database_url()), float(os.environ.get(ENV_HEARTBEAT) or HEARTBEAT_S),
                   checked=desc.checked)  # fmt: skip


def run_described(name: str, request: Any, address: str, namespace: str, *, kind: str | None = None, resumes: str = "",
                  on_units: Callable[[list[dict[str, Any]]], None] | None = None,
                  say: Callable[[str], None] | None = None) -> tuple[Any, Followed]:  # fmt: skip
    """Run a described workflow (:mod:`fleetctl.workflows.describe`) on Temporal and follow it to its end: (its result, as the
    description's ``result_type``; the run followed: workflow id, job).

    ``kind`` names the workflow's id (``fleetctl-<kind>-...``; default the description's name); ``on_units(rows)`` gets
    the units' rows (``key``, ``stage``, ``out`` as JSON values, ``lost``) once a second; ``say(text)`` gets each new text
    of what a gate waits for (a maintenance window), as the in-process engine's ``Context.say``; ``resumes`` says, when
    the run is cancelled, what resumes it.

    Raises:
        Detached: on Ctrl-C (KeyboardInterrupt), which leaves the workflow running.
        FleetError: open refused (the refusal's own class: Locked, InputError ...; nothing was touched), the workflow was
            cancelled or failed.
    """
    from fleetctl import errors
    from fleetctl.workflows.describe import described, typed

    desc = described(name)
    run = Followed(kind or name, workflow_type="fleetctl.run")

    said: list[str | None] = [None]

    async def status(_client: Any, st: dict[str, Any]) -> None:
        if on_units is not None:
            on_units(list(st.get("units") or []))
        waiting = st.get("waiting")
        if say is not None and waiting and waiting != said[0]:
            said[0] = waiting
            say(str(waiting))

    try:
        out = follow(run, described_call(name, request), address, namespace, on_status=status)
    except Exception as e:
        from temporalio.client import WorkflowFailureError

        if isinstance(e, WorkflowFailureError):
            from temporalio.exceptions import CancelledError

            if isinstance(e.cause, CancelledError):  # `fleetctl jobs cancel`: the parent closed the run as interrupted
                then = f"; {resumes}" if resumes else ""
                raise FleetError(f"the {name} workflow {run.wid} was cancelled: its run is interrupted{then}", exit_code=130) from e
            raise FleetError(f"the {name} workflow {run.wid} failed: {e.cause or e}") from e
        raise
    if out.get("problems"):  # the checks found problems before open: the description's refusal, as in process
        raise desc.refusal(list(out["problems"]))
    if out.get("refused"):  # its kind as a value, raised here again as in process (a Locked is exit 2 on both engines)
        cls = getattr(errors, str(out.get("error") or ""), FleetError)
        raise (cls if isinstance(cls, type) and issubclass(cls, FleetError) else FleetError)(str(out["refused"]))
    if out.get("job") is not None:
        run.job = int(out["job"])
    return typed(desc.result_type, out["result"]), run


# How long `jobs show` and `jobs cancel` wait for Temporal before saying they cannot reach it (seconds).
REACH_S = 10.0


async def _described(workflow_id: str, address: str, namespace: str, reach: float) -> tuple[Any, str]:
    """A workflow's handle and its status name (RUNNING, CANCELED, ...), each exchange bounded by ``reach`` seconds."""
    client = await asyncio.wait_for(connect(address, namespace), reach)
    handle = client.get_workflow_handle(workflow_id)
    desc = await asyncio.wait_for(handle.describe(), reach)
    return handle, desc.status.name if desc.status is not None else "UNKNOWN"


def workflow_status(workflow_id: str, address: str, namespace: str, *, live: bool = True) -> dict[str, Any]:
    """A run's parent workflow as Temporal has it: its status, and (``live``) its live rows (the ``status`` query) while it runs.

    Raises:
        FleetError: Temporal cannot be reached (or does not know the workflow).
    """

    async def go() -> dict[str, Any]:
        handle, status = await _described(workflow_id, address, namespace, REACH_S)
        out: dict[str, Any] = {"status": status}
        if status == "RUNNING" and live:
            try:  # answered by a worker: none polling the control queue leaves the status alone
                out["live"] = await asyncio.wait_for(handle.query("status"), REACH_S)
            except Exception as e:  # noqa: BLE001 - the status stands without the live rows
                out["live_error"] = f"no answer to the status query: {type(e).__name__}"
        return out

    return _run(go(), workflow_id, address, namespace)


# Whether a workflow runs, as last asked (monotonic time, answer): a lock check asks once for many servers.
_RUNNING: dict[str, tuple[float, bool | None]] = {}
RUNNING_TTL_S = 5.0
RUNNING_REACH_S = 3.0  # a lock or job check must not hang on an unreachable Temporal


def workflow_running(workflow_id: str) -> bool | None:
    """Whether a run's parent workflow is still running on Temporal: False once it is closed (completed,
    cancelled, terminated, timed out); None when this process cannot tell (``FLEETCTL_TEMPORAL`` unset, the
    server unreachable within a few seconds, or a workflow it does not know: pointed at another server or
    namespace than the run's, a running run must not be taken for gone, nor its locks broken).

    Safe to call with an event loop running (a worker's activity): the exchange runs on a thread of its own.
    """
    import concurrent.futures
    import time

    address = temporal_address()
    if address is None:
        return None
    hit = _RUNNING.get(workflow_id)
    if hit is not None and time.monotonic() - hit[0] < RUNNING_TTL_S:
        return hit[1]
    namespace = temporal_namespace()

    async def go() -> bool:
        return (await _described(workflow_id, address, namespace, RUNNING_REACH_S))[1] == "RUNNING"

    try:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fleetctl-temporal-status") as pool:
            answer: bool | None = pool.submit(asyncio.run, go()).result()
    except Exception:  # noqa: BLE001 - unreachable, unknown, timed out: cannot tell, and a lock is then never taken for gone
        answer = None
    _RUNNING[workflow_id] = (time.monotonic(), answer)
    return answer


def cancel_workflow(workflow_id: str, address: str, namespace: str) -> str:
    """Request the cancellation of a run's parent workflow; its status before (only a RUNNING one is cancelled).

    The parent's children are cancelled with it (``ParentClosePolicy.REQUEST_CANCEL``), and its ``close``
    activity marks the job interrupted and releases the locks.

    Raises:
        FleetError: Temporal cannot be reached (or does not know the workflow).
    """

    async def go() -> str:
        handle, status = await _described(workflow_id, address, namespace, REACH_S)
        if status == "RUNNING":
            await asyncio.wait_for(handle.cancel(), REACH_S)
        return status

    return _run(go(), workflow_id, address, namespace)


def _run(coro: Any, workflow_id: str, address: str, namespace: str) -> Any:
    """Run a short exchange with Temporal; every way it can fail is one FleetError naming the server and the workflow."""
    from temporalio.service import RPCError

    try:
        return asyncio.run(coro)
    except FleetError:
        raise
    except TimeoutError as e:
        raise FleetError(f"cannot reach Temporal at {address} (namespace {namespace}): no answer within {REACH_S:g} s") from e
    except RPCError as e:
        raise FleetError(f"Temporal at {address} (namespace {namespace}) about workflow {workflow_id}: {e.message}") from e
