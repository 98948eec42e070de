"""Session fixtures for the contract suites: every peer started once, on first need.

Each fixture starts one kind of peer the first time a selected test asks for
it (``-k sushy`` starts sushy-tools alone) and stops it at the end of the
session. A peer that cannot run here skips the tests that need it and says
why. The helpers live in ``peers.py`` and ``mockup_server.py`` beside this
file (the suite runs with ``--import-mode=importlib``, so this folder is put
on ``sys.path`` here for the test modules to import them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from mockup_server import MockupServer, mockups_dir  # noqa: E402
from peers import (  # noqa: E402
    LAB_FLAVOURS,
    SUSHY_SYSTEMS,
    fakenos_switches,
    netns_missing,
    netns_switch,
    sushy_emulator,
)


@pytest.fixture(scope="session")
def mockup_farm() -> Iterator[Callable[..., MockupServer]]:
    """``get(folder, **kw)``: the recorded BMC ``folder`` served read-only (started once per kw)."""
    base = mockups_dir()
    if base is None:
        pytest.skip("shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")
    started: dict[str, MockupServer] = {}

    def get(name: str, **kw: Any) -> MockupServer:
        if not (base / name).is_dir():
            pytest.skip(f"recorded BMC {name!r} not in {base}")
        key = name + repr(sorted(kw.items()))
        if key not in started:
            started[key] = MockupServer(base / name, **kw)
            started[key].start()
        return started[key]

    yield get
    for s in started.values():
        s.stop()


@pytest.fixture(scope="session")
def sushy_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """sushy-emulator's URL, serving ``SUSHY_SYSTEMS`` (admin/secret)."""
    with sushy_emulator(tmp_path_factory.mktemp("sushy-contract"), SUSHY_SYSTEMS) as url:
        yield url


@pytest.fixture(scope="session")
def lab_bmcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(running lab, {flavour: spec}): one in-process lab BMC per flavour, over TLS."""
    try:
        from fleetctl_lab.bmc import LabConfig, generate_specs, run_lab_in_thread
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.bmc not available: {e}")
    specs = generate_specs(len(LAB_FLAVOURS), prefix="ct", flavours=LAB_FLAVOURS)
    config = LabConfig(state_dir=tmp_path_factory.mktemp("lab-bmc-contract"), power_transition_s=0.1, firmware_update_s=0.3)
    with run_lab_in_thread(specs, config) as running:
        yield running, {s.flavour: s for s in specs}


@pytest.fixture(scope="session")
def lab_daemon_bmc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Any]]:
    """(lab.json status, spec): one lab BMC served by the lab daemon, a process of its own.

    Reached as an operator reaches it: URL and certificate pin from lab.json.
    The daemon is stopped by its pid (``lab_down``) at the end of the session.
    """
    try:
        from fleetctl_lab.bmc import generate_specs
        from fleetctl_lab.daemon import lab_down, lab_up
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.daemon not available: {e}")
    (spec,) = generate_specs(1, prefix="ctd", flavours=("dell",))
    state_dir = tmp_path_factory.mktemp("lab-daemon-contract")
    status = lab_up([spec], state_dir, config={"power_transition_s": 0.1, "firmware_update_s": 0.3}, timeout=60)
    try:
        yield status, spec
    finally:
        lab_down(state_dir)


@pytest.fixture(scope="session")
def lab_switches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(running switch lab, {name: spec}): a lab EOS and a lab SONiC switch, SNMP off."""
    import importlib.util

    for dep in ("asyncssh", "netmiko"):
        if importlib.util.find_spec(dep) is None:
            pytest.skip(f"the switch lab needs {dep}")
    try:
        from fleetctl_lab.switch import LabNeighbor, LabSwitchPort, LabSwitchSpec, SwitchLabConfig, run_switch_lab_in_thread
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.switch not available: {e}")

    def srv(name: str, nic: str, mac: str) -> Any:
        return LabNeighbor(system=name, port=nic, chassis_id=mac)

    eos = LabSwitchSpec(name="ct-eos-1", platform="eos", vlans=[10, 100, 200], ports=[
        LabSwitchPort(name="Ethernet1", speed_mbps=25_000, neighbor=srv("srv-01", "eth0", "02:00:00:00:01:01"), vlans=[100]),
        LabSwitchPort(name="Ethernet2", speed_mbps=25_000, neighbor=srv("srv-02", "eth0", "02:00:00:00:02:01"), vlans=[100]),
        LabSwitchPort(name="Ethernet3", speed_mbps=25_000),
        LabSwitchPort(name="Ethernet49/1", neighbor=LabNeighbor(system="ct-sonic-1", port="Ethernet120", kind="switch"),
                      mode="trunk", vlans=[10, 100, 200]),
    ])  # fmt: skip
    sonic = LabSwitchSpec(name="ct-sonic-1", platform="sonic", vlans=[100, 200], ports=[
        LabSwitchPort(name="Ethernet0", neighbor=srv("srv-01", "eth1", "02:00:00:00:01:02"), vlans=[100]),
        LabSwitchPort(name="Ethernet4", neighbor=srv("srv-02", "eth1", "02:00:00:00:02:02"), vlans=[100]),
        LabSwitchPort(name="Ethernet8"),
        LabSwitchPort(name="Ethernet120", neighbor=LabNeighbor(system="ct-eos-1", port="Ethernet49/1", kind="switch"),
                      mode="trunk", vlans=[100, 200]),
    ])  # fmt: skip
    cfg = SwitchLabConfig(state_dir=str(tmp_path_factory.mktemp("lab-switch-contract")), base_address="127.154.0.1", snmp=False)
    with run_switch_lab_in_thread([eos, sonic], cfg) as lab:
        yield lab, {s.name: s for s in (eos, sonic)}


@pytest.fixture(scope="session")
def fakenos_peer() -> Iterator[dict[str, Any]]:
    """{name: FakenosHost}: fakenos's recorded Arista EOS and Cisco NX-OS (admin/fleet-pw)."""
    with fakenos_switches({"fakenos-eos": "arista_eos", "fakenos-nxos": "cisco_nxos"}) as hosts:
        yield hosts


@pytest.fixture(scope="session")
def netns_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The Linux switch in a network namespace (``peers.NetnsSwitch``); needs root, sshd, sudo."""
    why = netns_missing(need_ping=False)
    if why:
        pytest.skip(f"Linux switch in a namespace: {why}")
    with netns_switch(tmp_path_factory.mktemp("netns-contract"), tag="c") as sw:
        yield sw
