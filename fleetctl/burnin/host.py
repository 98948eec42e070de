"""The burn-in stages on one host, over one SSH connection: the generic stage runner.

Per server: stop what a killed burn-in left running; then the stages of the
accelerator driver that serves the server's board kind (found through the
``fleetctl.accel`` entry points, :func:`fleetctl.plugins.accel_driver`):
pre-checks (the boards the inventory holds as the host shows them, their
state before), prepare (reset, clear), the workload on every board at once
with telemetry sampled while it runs, post-checks (counters, links, boards
still there). What the host said goes into one
:class:`~fleetctl.burnin.verdict.BoardObservation` per board; the verdict is
made elsewhere (``verdict.evaluate``). This module names no vendor.

The workload runs in a session of its own (``setsid``) whose id is written to
``<burn-in folder>/pgid`` on the host, so that a hung workload is killed as a
whole, and a burn-in killed with its workload still running stops it on the
next run before anything else (the folder is ``fleetctl_burnin_dir``, or
``var/tmp/fleetctl-burnin`` under ``fleetctl_root``, or
``/var/tmp/fleetctl-burnin``).

Nothing here raises for one host: a host that does not answer, a tool that
fails or a board kind without a driver is the outcome's ``error`` (the server
gets an ``error`` result, its boards no verdict).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fleetctl import hostio
from fleetctl.hostio import session_script, stop_leftover_script
from fleetctl.interfaces.accel import BurninJob, HostOutcome, InvBoard, StageError, burnin_dir

__all__ = ["HostJob", "HostOutcome", "InvBoard", "StageContext", "burn", "burnin_dir", "session_script", "stop_leftover_script"]

#: One server's burn-in as planned (the accelerator interface's job).
HostJob = BurninJob
#: The most stdout kept of one command of a stage (a server's kernel log, the largest real one, is ~1 MB).
MAX_COMMAND_BYTES = hostio.MAX_OUTPUT_BYTES


@dataclass
class StageContext:
    """The :class:`~fleetctl.interfaces.accel.BurninContext` a driver's stages get: one host session, bounded reads."""

    host: hostio.Session
    job: BurninJob
    out: HostOutcome
    work: str

    async def run(self, cmd: str, *, what: str, timeout: float | None = None, ok_codes: tuple[int, ...] = (0,),
                  max_bytes: int = MAX_COMMAND_BYTES) -> str:  # fmt: skip
        t = self.job.command_timeout if timeout is None else timeout
        try:
            done = await self.host.run(cmd, timeout=t, max_bytes=max_bytes)
        except hostio.HostOutputError as e:
            raise StageError(f"{what}: no answer within {t:g} s" if e.timed_out else f"{what}: {e}") from e
        if done.exit_status not in ok_codes:
            err = done.last_error_line()
            raise StageError(f"{what}: exited {done.exit_status}" + (f": {err}" if err else ""))
        return done.stdout

    def in_session(self, body: str) -> str:
        return session_script(self.work, body)

    async def stop_session(self, what: str) -> str:
        return await self.run(stop_leftover_script(self.work), what=what)


async def burn(job: HostJob) -> HostOutcome:
    """The stages on one host; never raises for what the host does."""
    import asyncssh

    from fleetctl.plugins import accel_driver

    out = HostOutcome()
    driver = accel_driver(job.driver_key)
    try:
        async with hostio.connect(job.target, timeout=job.connect_timeout) as host:
            ctx = StageContext(host=host, job=job, out=out, work=burnin_dir(job.hostvars))
            t = time.monotonic()
            left = await ctx.stop_session("stopping a leftover burn-in")
            if left.strip():
                out.notes.append(f"a burn-in left running by an earlier run was stopped ({left.strip()})")
            out.stages["cleanup"] = time.monotonic() - t
            stages = driver.burnin(ctx)
            t = time.monotonic()
            out.observations = await stages.prechecks()
            out.stages["pre-checks"] = time.monotonic() - t
            if not any(o.present for o in out.observations):
                return out
            t = time.monotonic()
            await stages.prepare()
            out.stages["reset"] = time.monotonic() - t
            t = time.monotonic()
            await stages.workload()
            out.stages["workload"] = out.workload_s = out.workload_s or time.monotonic() - t
            t = time.monotonic()
            await stages.postchecks()
            out.stages["post-checks"] = time.monotonic() - t
    except (hostio.HostUnreachable, StageError) as e:
        out.error = str(e)
    except (OSError, asyncssh.Error) as e:
        out.error = f"ssh {job.target.address}:{job.target.port}: the connection broke: {e or type(e).__name__}"
    return out
