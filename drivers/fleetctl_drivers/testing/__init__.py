"""Contract suites a driver runs to show it keeps fleetctl's interfaces (after NAPALM's ``napalm.base.test``).

One module per device kind: :mod:`~fleetctl_drivers.testing.bmc`,
:mod:`~fleetctl_drivers.testing.switch` and :mod:`~fleetctl_drivers.testing.accel`.
Each holds the checks of what a sane typed answer is, the rule that a lacking
capability is refused clearly (never a crash, never a silent empty answer),
and a base test class: a driver's own test module subclasses it, says which
peers (or recorded outputs) it runs against and how to reach them, and pytest
collects the contract's tests from the subclass. docs/drivers.md ("Contract
suites") shows a subclass for each kind.

These modules import pytest; nothing else in ``fleetctl_drivers`` imports
them, so pytest is needed only where the suites run (the distribution's
``testing`` extra: ``pip install fleetctl-drivers[testing]``).
"""
