"""Simulated switches: SSH CLIs (Arista EOS, SONiC) and SNMP agents, many in one process.

A lab switch is stateful: a VLAN change made over SSH persists, ``show``
reflects it, ``write memory``/``config save -y`` keeps it across the lab's
reboot fault, and the SNMP data follows (admin status, ifAlias). LLDP
neighbours come from the inventory's cabling. Bad commands get the real
OS's error text. Faults are set per port or per switch while the lab runs.
The lab never imports fleetctl's drivers: it is their peer.

Public API (stable)
-------------------
Specs (``fleetctl_lab.switch.spec``, pydantic, JSON round-trip)::

    LabNeighbor(system, port, kind='server'|'switch', chassis_id='', description='')
    LabSwitchPort(name, speed_mbps=100000, neighbor=None, mode='access'|'trunk'|'routed',
                  vlans=[] (access: [vlan], empty = 1; trunk: allowed, empty = all),
                  native_vlan=None, description='', enabled=True)
    LabSwitchSpec(name, platform='eos'|'sonic', model='', serial='', os_version='', mac='',
                  username='admin', password='labpass', address=None, vlans=[], ports=[])
    SwitchLabConfig(state_dir=None, base_address='127.110.0.1', ssh_port=22, snmp_port=161,
                    snmp=True, community='public', control_host='127.0.0.1', control_port=0,
                    utilisation=0.05, snmp_start_timeout_s=60, snmp_processes=0 (0: one per 100 switches, up to the cores))
    NETMIKO_DEVICE_TYPE = {'eos': 'arista_eos', 'sonic': 'edgecore_sonic'}
    generate_switch_specs(n, ports=64, prefix='labsw', platforms=('eos', 'sonic')) -> [LabSwitchSpec]
    switch_specs_from_inventory(conn, password, names=None, port_vlans='default'|'plan')
        (``fleetctl_lab.switch.inventory``; `fleetctl lab up` uses it)

The lab (``fleetctl_lab.switch.server``)::

    lab = SwitchLab(specs, config); await lab.start(); await lab.stop()
    lab.status() -> {'switch_control_url': url,
                     'switches': {name: {ssh: 'host:port', snmp: 'host:port', community,
                                         platform, device_type, username}}}   (no passwords)
    lab.switch_fault(name, port, fault, value=True) -> faults in force
        port faults: flap (True = 2 s period, or seconds), crc (True = 50 errors/s, or a rate),
                     miscabled (True: swap with the next cabled port; a port name: swap with it;
                                {'system', 'port'}: that neighbour), down (cable pulled)
        switch faults (port=None): reboot, ssh_drop_after (N: the session drops after N more
                     commands, once; the Nth command takes effect, its answer never comes),
                     ssh_latency_ms, overheat (True = 97 C)
        value None/False clears one.
    lab.clear_faults(name, port=None); lab.describe(name); lab.counters(name)
    with run_switch_lab_in_thread(specs, config) as lab:   # ThreadedSwitchLab, for tests
        lab.ssh_of(name); lab.snmp_of(name); lab.community(name); lab.switch_fault(...)

Control endpoint (plain HTTP on 127.0.0.1, ``switch_control_url`` in lab.json)::

    GET    /lab/v1                        summary and the fault catalogue
    GET    /lab/v1/switches               as lab.json's "switches"
    GET    /lab/v1/switches/{name}        state: ports (config, oper, cabled_to, lldp, counters, faults)
    GET    /lab/v1/switches/{name}/faults
    PATCH  /lab/v1/switches/{name}/faults {"port": "Ethernet4" | null, "faults": {"flap": 2, "crc": null}}
                                          or {"port": ..., "fault": "crc", "value": 100}
    DELETE /lab/v1/switches/{name}/faults[?port=Ethernet4]

The daemon (``fleetctl_lab.daemon``) runs the switch lab when its spec has
``"switches"``; ``lab_up(..., switches=[...], switch_config={...})``.

Conventions
-----------
- SSH: password login with the spec's credential (the lab credential when
  built from the inventory); one ed25519 host key per lab in the state folder.
  EOS logs in at ``name>``; ``enable`` needs no password. SONiC logs in to
  bash (``admin@name:~$``); ``config`` needs ``sudo`` (or ``sudo -s``).
- SNMP v2c only. Community ``<community>@<switch>``, one snmpsim process,
  one UDP endpoint per switch on the switch's own address. Numeric OIDs.
- NX-OS and Linux switches of the inventory are not served.
"""

from fleetctl_lab.switch.server import (
    SwitchLab,
    ThreadedSwitchLab,
    run_switch_lab_in_thread,
)
from fleetctl_lab.switch.spec import (
    NETMIKO_DEVICE_TYPE,
    LabNeighbor,
    LabSwitchPort,
    LabSwitchSpec,
    SwitchLabConfig,
    generate_switch_specs,
)
from fleetctl_lab.switch.state import PORT_FAULTS, SWITCH_FAULTS, SimSwitch

__all__ = [
    "NETMIKO_DEVICE_TYPE",
    "PORT_FAULTS",
    "SWITCH_FAULTS",
    "LabNeighbor",
    "LabSwitchPort",
    "LabSwitchSpec",
    "SimSwitch",
    "SwitchLab",
    "SwitchLabConfig",
    "ThreadedSwitchLab",
    "generate_switch_specs",
    "run_switch_lab_in_thread",
]
