"""fleetctl: bare-metal fleet provisioning and inventory."""

__version__ = "0.1.0"
