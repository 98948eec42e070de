"""A lab host's shell run here in its sandbox (what the lab's SSH server runs for a command): the core's burn-in
stage runner and sweep reader reach a lab host through it, with only the SSH transport replaced."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from fleetctl_lab.bmc.spec import LabServerSpec
from fleetctl_lab.host_standins import TIME_SCALE_ENV
from fleetctl_lab.hosts import HostSandbox

from fleetctl import hostio
from fleetctl.interfaces.host import HostTarget


class LocalHost:
    """The lab host's shell, run here in its sandbox's environment (what the lab's SSH server runs for a command)."""

    def __init__(self, sb: HostSandbox, target: HostTarget) -> None:
        self.sb, self.target = sb, target
        self.env = {**sb.env("lab"), TIME_SCALE_ENV: os.environ.get(TIME_SCALE_ENV, "0.05")}

    async def _spawn(self, command: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec("sh", "-c", command, env=self.env, cwd=self.sb.home,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip

    async def run(self, command: str, *, timeout: float, max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> hostio.Output:
        proc = await self._spawn(command)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise hostio.HostOutputError("no answer in time", host=self.target.name, command=command, timed_out=True) from None
        if len(out) > max_bytes:
            raise hostio.HostOutputError(f"more than {max_bytes} bytes", host=self.target.name, command=command)
        return hostio.Output(stdout=out.decode(), stderr=err.decode(), exit_status=proc.returncode)

    async def stream(self, command: str, *, deadline: float, on_line: Callable[[str, str], None]) -> tuple[int | None, bool]:
        proc = await self._spawn(command)

        async def pump(reader: asyncio.StreamReader, name: str) -> None:
            while line := await reader.readline():
                on_line(name, line.decode().rstrip("\n"))

        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"), proc.wait())
        try:
            await asyncio.wait_for(pumps, max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            return None, True  # the session goes on until the runner stops it (its pgid file), as over SSH
        return proc.returncode, False

    async def batch(self, commands: Mapping[str, str], *, timeout: float, max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> dict[str, Any]:
        script, token = hostio.batch_script(commands)
        return hostio.parse_batch((await self.run(script, timeout=timeout, max_bytes=max_bytes)).stdout, token)


def sandboxed(tmp_path: Path, monkeypatch: Any, spec: LabServerSpec) -> tuple[HostSandbox, HostTarget]:
    """A lab host's sandbox for ``spec`` (booted, installed, at the lab's time scale 0.05), with ``hostio.connect``
    reaching it through :class:`LocalHost`."""
    monkeypatch.setenv(TIME_SCALE_ENV, "0.05")
    sb = HostSandbox(tmp_path / "lab", spec)
    sb.sync({"install_id": 1, "boot_id": 1, "installed_at": None, "boot_source": "pxe", "boot_image": None, "devices_missing": 0})
    target = HostTarget(name=spec.name, address="127.0.0.1")

    @contextlib.asynccontextmanager
    async def connect(t: HostTarget, *, timeout: float) -> AsyncIterator[LocalHost]:
        yield LocalHost(sb, t)

    monkeypatch.setattr(hostio, "connect", connect)
    return sb, target
