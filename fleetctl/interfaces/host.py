"""A server's installed OS as a target, like a BMC or a switch: where it is and how to log in.

:class:`HostTarget` is resolved from the inventory by ``fleetctl.targets``
(:func:`~fleetctl.targets.host_target`, :func:`~fleetctl.targets.resolve_hosts`)
and reached through one runner, :func:`fleetctl.hostio.connect`, by every
reader of a host: provisioning's readiness probe, burn-in and the sweep's host
level. Accelerator drivers receive the open session (:class:`HostSession`),
never an address.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class HostTarget:
    """How to reach one server's installed OS over SSH.

    ``key_file`` is the reference to the site's private key (a path; None: no
    key of ours, e.g. a lab host that takes any). With ``strict`` the host's
    key is checked against ``known_hosts`` (the site's file); without it a
    new host key is accepted (a freshly installed host has a new one), as
    Ansible's ``accept-new`` does with ``known_hosts`` as its file.
    """

    name: str  # the server, as errors name it
    address: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    known_hosts: str | None = None
    strict: bool = False

    @property
    def where(self) -> str:
        """``user@address:port``, as messages name the SSH endpoint."""
        return f"{self.user}@{self.address}:{self.port}"


@dataclass(frozen=True)
class HostRef:
    """A server's host as the host readers need it: the target, its host variables, and what boards it carries."""

    target: HostTarget
    hostvars: Mapping[str, Any] = field(default_factory=dict)  # the inventory's Ansible variables (tool paths, folders)
    board_kind: str | None = None  # the hardware model's board kind (the accelerator driver's key)
    model: str | None = None  # the hardware model's name


class CommandOutput(Protocol):
    """What one command printed (``fleetctl.hostio.Output``)."""

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...

    @property
    def exit_status(self) -> int | None: ...

    def last_error_line(self, limit: int = 200) -> str: ...


class HostSession(Protocol):
    """One open SSH connection to a host; every read is bounded (bytes, lines, time: ``fleetctl.hostio``).

    Errors: ``fleetctl.hostio.HostOutputError`` (a bound was passed; the
    command was stopped); a broken connection raises the SSH library's error,
    which the caller of the driver reports for the host.
    """

    target: HostTarget

    async def run(self, command: str, *, timeout: float, max_bytes: int = ...) -> CommandOutput:
        """Run one shell command; its stdout is kept up to ``max_bytes`` (more stops it)."""
        ...

    async def stream(self, command: str, *, deadline: float, on_line: Callable[[str, str], None]) -> tuple[int | None, bool]:
        """Run a long command, handing each line to ``on_line(stream, line)``: (exit status, timed out)."""
        ...

    async def batch(self, commands: Mapping[str, str], *, timeout: float, max_bytes: int = ...) -> dict[str, BatchPart]:
        """Several shell commands in one round trip (one process on the host), each one's stdout and status by name."""
        ...


@dataclass(frozen=True)
class BatchPart:
    """One command of a batch: its stdout (stderr merged in only where the command says ``2>&1``) and exit status."""

    stdout: str
    exit_status: int | None
