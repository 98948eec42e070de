"""Simulated BMCs: the lab's Redfish services, many in one process.

A lab BMC is stateful and slow where real ones are slow: sessions with a
limit, power transitions that take time, a boot override consumed at the
next boot, BIOS settings pending until a reset, firmware updates that run as
tasks and may fail. Faults (latency, 5xx, hangs, dropped connections, a
failed PSU or fan, a hot sensor, a degraded PCIe link, memory errors, a
failing update, clock skew) are set per BMC while the lab runs. Counters and
a power timeline let tests check what a workflow did to each server. The lab
never imports fleetctl's drivers: it is their peer.

Public API (stable)
-------------------
Specs (``fleetctl_lab.bmc.spec``, pydantic models, JSON round-trip)::

    LabNic(name, mac, speed_mbps=100000, slot=None, model=..., firmware=...)
    LabBoard(kind: 'mncore2'|'gpu', serial, slot, pci_address='', model='',
             firmware={component: version}, max_lanes=16, pcie_gen='')
    LabServerSpec(name, serial='', model='Lab Server', manufacturer='Lab',
                  system_id='' (flavour default: '1' generic/hpe/ilo6, 'system'
                  openbmc, 'Self' ami, 'System.Embedded.1' dell/idrac9,
                  'System_0' nvidia),
                  username='admin', password='labpass', nics=[], boards=[],
                  firmware={'BMC': ..., 'BIOS': ...}, power_watts_idle=None,
                  power_watts_peak=None,
                  flavour='generic'|'hpe'|'openbmc'|'ami'|'dell'|'ilo6'|'idrac9'|'nvidia',
                  bios_attributes={}, address=None)
    LabConfig(state_dir=None, address_mode='port'|'address', host='127.0.0.1',
              base_port=0, base_address='127.10.0.1', port=8443,
              control_host='127.0.0.1', control_port=0, tls=True,
              max_sessions=16, session_timeout_s=1800,
              power_transition_s=2.0, graceful_shutdown_s=None,
              firmware_update_s=5.0, initial_power='Off', backlog=128,
              hosts=False, install_s=30.0, os_boot_s=1.0,
              host_base_address=None, host_ssh_port=2222)
        ``hosts=True``: the lab also serves the host behind each BMC over
        SSH (``fleetctl_lab.hosts``; ``fleetctl lab up`` turns it on).
    generate_specs(n, *, prefix='lab', mix=('mncore', 'gpu'),
                   flavours=('generic', 'hpe', 'openbmc', 'ami', 'dell'),
                   password='labpass', start=0) -> list[LabServerSpec]
        MN-Core servers carry 4 MN-Core 2 boards, GPU servers 8 GPUs (4 on an
        'nvidia' tray); both have two NICs on PCIe cards. Names:
        '{prefix}-{mncore|gpu}-{i:05d}'.

The lab (``fleetctl_lab.bmc.server``)::

    lab = BMCLab(specs, config)
    await lab.start(); await lab.stop()      # or: async with BMCLab(...) as lab
    lab.url_of(name) -> 'https://127.10.0.3:8443'
    lab.fingerprint_of(name) -> 'sha256:<hex of the cert DER>'
    lab.set_fault(name, **faults) -> dict  # merge; None/False clears one
    lab.clear_faults(name)
    lab.counters(name) -> dict             # see below
    lab.host(name) -> dict                 # the host's phase, see fleetctl_lab.hosts
    lab.status() -> dict                   # lab.json content, no passwords
    lab.control_url, lab.names(), lab.bmc(name) -> SimBMC

    with run_lab_in_thread(specs, config) as lab:   # ThreadedLab, for tests
        lab.url_of(name); lab.set_fault(name, latency_ms=50); lab.counters(name)

The daemon (``fleetctl_lab.daemon``)::

    python -m fleetctl_lab.daemon --spec FILE.json --state-dir DIR
    lab_up(specs, state_dir, *, config=None, timeout=120) -> status dict
    lab_status(state_dir, *, probe=True) -> status dict  ('running': bool)
    lab_down(state_dir, *, timeout=15) -> {'stopped': bool, 'pid': int|None}

Faults (``FAULTS``): ``latency_ms``, ``error_rate`` (0..1, 500/503 with a
Redfish error body), ``hang``, ``drop`` (True or 0..1), ``psu_failed`` and
``fan_failed`` (index, True = first), ``hot_sensor`` (index or name such as
'Inlet' or 'GPU3'), ``pcie_degraded`` ({'slot': n, 'lanes': 8, 'gen':
'Gen3'}, a slot, or True = first board), ``memory_errors`` (DIMM_A1 Warning,
system Warning, log entry), ``firmware_fail`` (True: every update fails;
an int N: the next N fail), ``clock_skew_s``, ``device_missing`` (count,
True = 1: that many accelerator device nodes, the last boards, are absent on
the host from its next boot; cleared, they are back at the next boot),
``wrong_cert`` (True: new TLS connections get a freshly generated
self-signed certificate, another key, instead of the pinned one; cleared,
the pinned one is back), ``nextlink_loop`` and ``nextlink_forever`` (True
or a collection's name such as 'Processors': the collection is paged two
members at a time and its last page links back to an earlier one, or every
page links a new ``$skip`` forever), ``sensors_absent`` (True: a server that
is not on reports its temperatures Absent, reading 0, thresholds 0, as the
ilo6 flavour always does), ``board_no_serial`` (a slot, True = the highest:
that board is shown without a SerialNumber).

Flavours (``flavours.FLAVOURS``, vendor dialects as data): generic (DMTF),
hpe (iLO 5), ilo6 (iLO 6/7: Oem.Hpe, both thermal/power generations and
Sensors), dell (iDRAC naming), idrac9 (iDRAC 9 16G: Oem.Dell, GPUs also as
Processors Video.Slot.N-1, PCIe ids bus-device, virtual media under the
system), openbmc (bmcweb), ami (MegaRAC), nvidia (a GB200-like tray: systems
System_0 and HGX_Baseboard_0, GPUs as Processors GPU_n in chassis
HGX_GPU_n, the two GPUs of a processor module sharing one serial).

Counters: ``power_on`` (Off -> On by request), ``power_off``,
``power_cycle`` (restarts of a running server: ForceRestart, GracefulRestart,
PowerCycle), ``resets``, ``boots``, ``firmware_flashes``,
``firmware_failures``, ``requests``, ``sessions_created``,
``sessions_open``, ``sessions`` (the open ones: ``id`` as in their URL,
``uses``: requests made with their token), ``auth_failures``, ``faults_served``, ``installs``
(completed OS installs), ``host`` (``lab.host(name)``),
``power_timeline`` ([{'on': ts, 'off': ts|None}], epoch seconds, power drawn
from the start of PoweringOn to the end of PoweringOff), ``boot_log``
([{'time', 'source', 'image'?}]), ``firmware`` ({id: version}),
``bios_pending``, ``faults``, ``power_state``.

Control endpoint (plain HTTP on 127.0.0.1, ``lab.control_url``)::

    GET    /lab/v1                       summary, the fault catalogue, Redfish requests served by all BMCs
    GET    /lab/v1/bmcs                  {name: {url, fingerprint, flavour, system_id}}
    GET    /lab/v1/bmcs/{name}[/counters]  counters as above plus url
    GET    /lab/v1/bmcs/{name}/faults
    PATCH  /lab/v1/bmcs/{name}/faults    body: {fault: value}; null clears
    DELETE /lab/v1/bmcs/{name}/faults    clear all
    POST   /lab/v1/faults                {"names": [...] | "*", "faults": {...} | null}
    GET    /lab/v1/hosts                 {name: host info}
    GET    /lab/v1/hosts/{name}          {phase: off|installing|booting|up|no-os|firmware,
                                          up_since, up_at, installed, install_id, installs,
                                          boot_id, boot_source, devices_missing, ssh, ...}

Redfish conventions of the lab
------------------------------
- Open without credentials: ``/redfish``, ``/redfish/v1``, and POST
  ``/redfish/v1/SessionService/Sessions`` (201 + X-Auth-Token + Location;
  401 on bad credentials; 503 ``SessionLimitExceeded`` past
  ``max_sessions``). Everything else takes basic auth or X-Auth-Token.
- ComputerSystem.Reset: On, ForceOff, GracefulShutdown, ForceRestart,
  GracefulRestart, PowerCycle (transition table in ``state.py``). On while
  on is a no-op (never a power cycle). Conflicting requests during a
  transition get 409.
- SimpleUpdate: ImageURI names the component and version as
  ``<component>-<version>.<ext>`` or ``<component>_<version>.<ext>``
  (component matched against FirmwareInventory ids case-insensitively:
  ``BMC``, ``BIOS``, ``mncore2_slot1_board``, ``gpu_slot3_vbios``), or
  ``Targets`` names the inventory URI. Answers 202 + Location of
  ``/redfish/v1/TaskService/Tasks/{id}/Monitor`` (202 while Running, 200
  when Completed/Exception). A completed update changes the version at once.
- Virtual media under ``Managers/{id}/VirtualMedia/{slot}`` with the
  flavour's slot names (hpe and ilo6 '1'/'2', ami 'CD1', dell 'CD', openbmc
  and nvidia 'Slot_0'); idrac9's under ``Systems/{id}/VirtualMedia/{1,2}``.
- MN-Core 2 PCI ids, model string and PCIe generation are assumptions (not
  public); they live in ``resources.PCI_IDS`` and ``spec.LabBoard``.
"""

from fleetctl_lab.bmc.server import BMCLab, ThreadedLab, run_lab_in_thread
from fleetctl_lab.bmc.spec import LabBoard, LabConfig, LabNic, LabServerSpec, generate_specs
from fleetctl_lab.bmc.state import FAULTS, SimBMC

__all__ = [
    "FAULTS",
    "BMCLab",
    "LabBoard",
    "LabConfig",
    "LabNic",
    "LabServerSpec",
    "SimBMC",
    "ThreadedLab",
    "generate_specs",
    "run_lab_in_thread",
]
