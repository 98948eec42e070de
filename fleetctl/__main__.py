"""`python -m fleetctl` runs the CLI (as the `fleetctl` script does)."""

from fleetctl.cli.app import entry

entry()
