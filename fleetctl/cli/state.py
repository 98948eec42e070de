"""Process-wide CLI settings set by the root callback."""

debug = False

# The fleet (database) a device command acts on, once it has said so
# (fleetctl.cli.common.announce_fleet); machine-readable output carries it.
fleet: str | None = None
