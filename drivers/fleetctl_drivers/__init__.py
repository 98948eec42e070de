"""Hardware drivers for fleetctl, registered through entry points.

This folder is ``drivers/`` in the source tree and installs as the
``fleetctl_drivers`` package of the ``fleetctl-drivers`` distribution, so
nothing generic named ``drivers`` ever lands in site-packages.
"""
