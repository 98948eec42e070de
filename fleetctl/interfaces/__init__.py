"""The core's view of hardware: typed results and one interface per capability.

Drivers (the drivers distribution and third parties' distributions, found through
entry points: ``fleetctl.plugins``) implement these; the core (CLI, workflows,
checks) only ever imports from here, never a driver module.
"""

from fleetctl.interfaces.bmc import (  # noqa: F401
    BMC,
    NIC,
    BiosInterface,
    BMCTarget,
    Board,
    BootDevice,
    BootInterface,
    BootOverride,
    FirmwareComponent,
    FirmwareInterface,
    HealthInterface,
    HealthItem,
    HealthReport,
    InventoryInterface,
    LogEntry,
    ManagerFacts,
    ManagerInterface,
    MediaInterface,
    MediaStatus,
    NoopBios,
    NoopBoot,
    NoopFirmware,
    NoopHealth,
    NoopInventory,
    NoopManager,
    NoopMedia,
    NoopPower,
    PCIeDevice,
    PowerInterface,
    PowerState,
    SystemFacts,
    TaskProgress,
    TaskResult,
    Temperature,
)
from fleetctl.interfaces.sweep import BMCSweepResult, SweepProgress, SwitchSweepResult, TargetResult  # noqa: F401
