"""One exception root for everything fleetctl raises on purpose.

The CLI maps these to a one-line message and an exit code in one place
(`fleetctl.cli.app.main`); anything else is a bug and shows a traceback.
Library errors are wrapped with ``raise ... from e`` so the cause survives for
``--debug``; we never subclass third-party exceptions (netmiko's roots are
paramiko's, and we do not want their import cost or their hierarchy).
"""

from __future__ import annotations

# Exit codes, documented in docs/cli.md.
EXIT_OK = 0
EXIT_PROBLEMS = 1  # the command ran but found problems or failed on some targets
EXIT_USAGE = 2  # bad usage or bad input; nothing was changed
EXIT_STORE = 6  # the database could not be opened, read or written (read-only, full, locked past the timeout)
EXIT_BREAKER = 7  # a sweep would have tainted more of a pool than the k8s policy allows: it tainted none (docs/kubernetes.md)
EXIT_PUBLISH = 8  # a sweep was stored but its verdicts could not be published to a cluster (did not answer, refused)


class FleetError(Exception):
    """Root of fleetctl's own errors."""

    exit_code: int = EXIT_PROBLEMS

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class InputError(FleetError):
    """Bad input from the operator: a file, a field, an argument.

    ``location`` names where (``site.yaml:12``) and ``field`` what
    (``racks[0].servers[3].serial``) so the one-line message can point at it.
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, location: str | None = None, field: str | None = None) -> None:
        self.location = location
        self.field = field
        parts = []
        if location:
            parts.append(location)
        if field:
            parts.append(field)
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class NotFound(InputError):
    """A named object (server, rack, switch ...) does not exist."""


class InventoryError(FleetError):
    """The inventory would become inconsistent (duplicate, overlap, dangling)."""

    exit_code = EXIT_USAGE


class StoreError(FleetError):
    """The database could not be opened, migrated or written."""


class SecretError(FleetError):
    """A credential reference could not be resolved."""

    exit_code = EXIT_USAGE


class DriverError(FleetError):
    """A hardware driver failed talking to a device."""


class BMCError(DriverError):
    """A BMC answered with an error or not at all."""


class SwitchError(DriverError):
    """A switch answered with an error or not at all."""


class AuthError(DriverError):
    """Login to a device was refused."""


class Timeout(DriverError):
    """A device did not answer in time."""


class TLSMismatch(DriverError):
    """A device's certificate does not match the pinned fingerprint."""


class InvalidTransition(FleetError):
    """A lifecycle transition that the state machine does not allow."""

    exit_code = EXIT_USAGE


class Locked(FleetError):
    """A server is reserved by another worker."""
