"""The Redfish driver against live emulators: sushy-tools (OpenStack's Redfish
emulator, a peer we did not write) and, at the end, fleetctl's own lab BMCs
(``fleetctl_lab.bmc``, one per vendor flavour, over TLS with pinned
certificates, with faults injected).

sushy-emulator runs with its fake driver (no libvirt) on 127.0.0.1 and a free
port, behind an htpasswd file (bcrypt), with one fake system per test that
changes power state, so power tests run side by side. Its power changes land
1-11 s after the request (random), so tests poll. Skipped, saying why, when
sushy-emulator or bcrypt is missing or the emulator does not come up.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fleetctl_drivers.redfish import RedfishDriver
from peers import sushy_emulator

from fleetctl.errors import AuthError, DriverError
from fleetctl.interfaces.bmc import BMCTarget, BootDevice, PowerState

SYSTEMS = {  # name -> (uuid, initial power state)
    "node-on": ("11111111-0000-4000-8000-000000000001", "Off"),
    "node-off": ("11111111-0000-4000-8000-000000000002", "On"),
    "node-cycle": ("11111111-0000-4000-8000-000000000003", "On"),
    "node-restart": ("11111111-0000-4000-8000-000000000004", "On"),
    "node-media": ("11111111-0000-4000-8000-000000000005", "On"),
    "node-cli": ("11111111-0000-4000-8000-000000000006", "Off"),
}
POWER_WAIT = 25.0  # sushy's fake driver applies a change 1-11 s later


@pytest.fixture(scope="module")
def sushy(tmp_path_factory):
    with sushy_emulator(tmp_path_factory.mktemp("sushy"), SYSTEMS, mac_prefix="52:54:00:00:00") as url:
        yield url


@pytest.fixture(scope="module")
def image_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    (d / "tiny.iso").write_bytes(b"CD001" + bytes(2043))  # an ISO-9660-ish magic, 2 KiB
    handler = partial(SimpleHTTPRequestHandler, directory=str(d))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/tiny.iso"
    httpd.shutdown()
    httpd.server_close()


def tgt(url: str, name: str, **kw) -> BMCTarget:
    kw.setdefault("username", "admin")
    kw.setdefault("password", "secret")
    kw.setdefault("system_id", SYSTEMS[name][0])
    return BMCTarget(name=name, url=url, timeout=10, **kw)


def test_basic_auth_fallback_and_wrong_password(sushy):
    async def body():
        async with RedfishDriver(tgt(sushy, "node-media")) as bmc:
            # sushy offers no usable SessionService: the driver uses basic auth
            assert bmc.client.auth_mode == "basic"
            assert bmc.system_uri.endswith(SYSTEMS["node-media"][0])
        with pytest.raises(AuthError, match="login refused"):
            async with RedfishDriver(tgt(sushy, "node-media", password="wrong")):
                pass

    asyncio.run(body())


def test_basic_auth_chosen_reads_the_same_facts_with_a_request_fewer(sushy):
    """``auth="basic"`` (FLEETCTL_BMC_AUTH=basic, issue 24): the same facts, one request fewer, the system picked by id."""

    async def read(auth: str, system_id: str | None) -> tuple[int, object]:
        async with RedfishDriver(tgt(sushy, "node-media", system_id=system_id), auth=auth, read_once=True) as bmc:
            assert bmc.client.auth_mode == "basic"
            assert bmc.system_uri.endswith(system_id or "")
            facts = await bmc.inventory.facts()
            return bmc.client.requests_sent, facts

    async def body():
        # Without the inventory's system id: by default (no SessionService here) Basic is proven with a GET of the
        # Systems collection of its own, and the walk reads it again; chosen, the proof is the walk's own read of
        # it (read_once)
        basic, facts = await read("basic", None)
        session, same = await read("session", None)
        assert basic == session - 1, (basic, session)
        assert facts == same
        # With it, the system is read at its URI and the collection only as the proof, in both (issue 24)
        basic, facts = await read("basic", SYSTEMS["node-media"][0])
        session, same = await read("session", SYSTEMS["node-media"][0])
        assert basic == session, (basic, session)
        assert facts == same
        with pytest.raises(AuthError, match="login refused"):
            async with RedfishDriver(tgt(sushy, "node-media", password="wrong"), auth="basic"):
                pass

    asyncio.run(body())


def test_power_on_off_cycle_restart(sushy):
    async def power_on():
        async with RedfishDriver(tgt(sushy, "node-on")) as bmc:
            assert await bmc.power.state() == PowerState.OFF
            assert await bmc.power.on() is True
            await bmc.power.wait_for(PowerState.ON, timeout=POWER_WAIT, interval=0.3)
            assert await bmc.power.on() is False  # already on: nothing sent, nothing cycled
            assert await bmc.power.state() == PowerState.ON

    async def power_off():
        async with RedfishDriver(tgt(sushy, "node-off")) as bmc:
            assert await bmc.power.off(force=True) is True
            await bmc.power.wait_for(PowerState.OFF, timeout=POWER_WAIT, interval=0.3)
            assert await bmc.power.off() is False

    async def cycle():
        async with RedfishDriver(tgt(sushy, "node-cycle")) as bmc:
            seen: list[PowerState] = []
            real_state = bmc.power.state

            async def recording_state():
                s = await real_state()
                seen.append(s)
                return s

            bmc.power.state = recording_state  # type: ignore[method-assign]
            await bmc.power.cycle()  # no PowerCycle in sushy: ForceOff, wait, On
            await bmc.power.wait_for(PowerState.ON, timeout=POWER_WAIT, interval=0.3)
            assert PowerState.OFF in seen and seen[-1] == PowerState.ON

    async def restart():
        async with RedfishDriver(tgt(sushy, "node-restart")) as bmc:
            await bmc.power.restart(force=True)
            assert await bmc.power.state() == PowerState.OFF  # sushy drops to Off at once
            await bmc.power.wait_for(PowerState.ON, timeout=POWER_WAIT, interval=0.3)

    async def body():
        await asyncio.gather(power_on(), power_off(), cycle(), restart())

    asyncio.run(body())


def test_boot_override(sushy):
    async def body():
        async with RedfishDriver(tgt(sushy, "node-media")) as bmc:
            await bmc.boot.set(BootDevice.PXE)
            assert (await bmc.boot.get()).device == BootDevice.PXE
            # sushy ignores BootSourceOverrideEnabled (always Continuous), so only the device is checked here
            await bmc.boot.set(BootDevice.CD, persistent=True)
            got = await bmc.boot.get()
            assert got.device == BootDevice.CD and got.persistent is True
            await bmc.boot.set(BootDevice.HDD, persistent=True)
            assert (await bmc.boot.get()).device == BootDevice.HDD

    asyncio.run(body())


def test_virtual_media_insert_and_eject(sushy, image_server):
    async def body():
        async with RedfishDriver(tgt(sushy, "node-media")) as bmc:
            slots = {s.slot: s for s in await bmc.media.slots()}
            assert "Cd" in slots and "CD" in slots["Cd"].media_types
            status = await bmc.media.insert(image_server)
            assert status.slot == "Cd" and status.inserted and status.image == image_server
            again = await bmc.media.insert(image_server)  # same image: nothing to do
            assert again.inserted and again.image == image_server
            ejected = await bmc.media.eject()
            assert ejected.slot == "Cd" and not ejected.inserted
            assert not {s.slot: s for s in await bmc.media.slots()}["Cd"].inserted

    asyncio.run(body())


def test_facts_manager_and_unsupported(sushy):
    async def body():
        async with RedfishDriver(tgt(sushy, "node-media")) as bmc:
            facts = await bmc.inventory.facts()
            assert facts.uuid == SYSTEMS["node-media"][0]
            assert [n.mac for n in facts.nics] == ["52:54:00:00:00:04"]
            manager = await bmc.manager.facts()
            assert manager.clock_skew_seconds is not None and abs(manager.clock_skew_seconds) < 5
            health = await bmc.health.report()
            assert health.system_health == "OK" and health.source == "Thermal" and health.temperatures
            with pytest.raises(DriverError, match="not supported by this BMC"):
                await bmc.bios.attributes()
            with pytest.raises(DriverError, match="not supported by this BMC"):
                await bmc.firmware.inventory()

    asyncio.run(body())


# --------------------------------------------------------------------------
# Third peer: fleetctl's own lab BMCs (fleetctl_lab.bmc), in-process, over TLS
# --------------------------------------------------------------------------

FLAVOURS = ("generic", "hpe", "openbmc", "ami", "dell")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    try:
        from fleetctl_lab.bmc.server import run_lab_in_thread
        from fleetctl_lab.bmc.spec import LabConfig, generate_specs
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.bmc not available: {e}")
    specs = generate_specs(len(FLAVOURS), prefix="rf", flavours=FLAVOURS)
    config = LabConfig(state_dir=tmp_path_factory.mktemp("lab"), power_transition_s=0.1, firmware_update_s=0.3)
    with run_lab_in_thread(specs, config) as running:
        yield running, {s.flavour: s for s in specs}


def lab_target(lab, spec, **kw) -> BMCTarget:
    kw.setdefault("fingerprint", lab.fingerprint_of(spec.name))
    return BMCTarget(
        name=spec.name, url=lab.url_of(spec.name), username=spec.username, password=spec.password, timeout=5, **kw
    )


def lab_driver(lab, spec, **kw) -> RedfishDriver:
    return RedfishDriver(lab_target(lab, spec, **kw), backoff=0.01, task_poll_interval=0.05)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_lab_facts_match_the_spec(lab, flavour):
    running, specs = lab
    spec = specs[flavour]

    async def body():
        async with lab_driver(running, spec) as bmc:
            assert bmc.client.auth_mode == "session"
            facts = await bmc.inventory.facts()
            assert facts.vendor == flavour
            assert facts.serial == spec.serial
            assert [(n.name, n.mac) for n in facts.nics] == [(n.name, n.mac.lower()) for n in spec.nics]
            assert sorted((b.kind, b.serial, b.slot) for b in facts.boards) == sorted(
                (b.kind, b.serial, str(b.slot)) for b in spec.boards
            )
            health = await bmc.health.report()
            assert health.problems == [] and health.psus and health.fans and health.temperatures
            manager = await bmc.manager.facts()
            assert abs(manager.clock_skew_seconds) < 3

    asyncio.run(body())


def test_lab_power_on_is_never_a_cycle_and_update_runs_as_task(lab):
    running, specs = lab
    spec = specs["dell"]

    async def body():
        async with lab_driver(running, spec) as bmc:
            await bmc.power.on()
            await bmc.power.wait_for(PowerState.ON, timeout=5, interval=0.05)
            before = running.counters(spec.name)
            assert await bmc.power.on() is False
            after = running.counters(spec.name)
            assert (after["power_on"], after["power_cycle"]) == (before["power_on"], before["power_cycle"])
            await bmc.power.cycle()
            assert running.counters(spec.name)["power_cycle"] == before["power_cycle"] + 1
            seen = []
            result = await bmc.firmware.simple_update("http://127.0.0.1:1/BIOS-2.11.0.bin", progress=seen.append)
            assert result.state == "Completed" and seen and seen[-1].state == "Completed"
            assert {c.name: c.version for c in await bmc.firmware.inventory()}["System BIOS"] == "2.11.0"

    asyncio.run(body())


def test_lab_faults_surface_as_data(lab):
    running, specs = lab
    spec = specs["ami"]
    try:
        running.set_fault(spec.name, psu_failed=True, pcie_degraded=True, clock_skew_s=120)

        async def body():
            async with lab_driver(running, spec) as bmc:
                health = await bmc.health.report()
                assert any(p.startswith("psu ") for p in health.problems)
                facts = await bmc.inventory.facts()
                degraded = [d for d in facts.pcie_devices if d.link_degraded]
                assert len(degraded) == 1
                assert 115 < (await bmc.manager.facts()).clock_skew_seconds < 125

        asyncio.run(body())
        running.clear_faults(spec.name)
        running.set_fault(spec.name, drop=True)

        async def dropped():
            from fleetctl.errors import BMCError

            with pytest.raises(BMCError, match=r"connection dropped|cannot connect"):
                async with lab_driver(running, spec, retries=1):
                    pass

        asyncio.run(dropped())
    finally:
        running.clear_faults(spec.name)


def test_lab_wrong_pin_and_sweep(lab):
    running, specs = lab
    from fleetctl_drivers.redfish import run_many

    from fleetctl.errors import TLSMismatch

    spec = specs["generic"]

    async def body():
        with pytest.raises(TLSMismatch, match="expected"):
            async with lab_driver(running, spec, fingerprint="00" * 32):
                pass
        results = await run_many(
            [lab_target(running, s) for s in specs.values()], lambda b: b.power.state(), concurrency=5
        )
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]

    asyncio.run(body())


@pytest.mark.parametrize("flavour", ["hpe", "dell"])
def test_lab_bios_stage_apply_on_reset_verify(lab, flavour):
    running, specs = lab
    spec = specs[flavour]
    want = {"ProcHyperthreading": "Disabled"}

    async def body():
        async with lab_driver(running, spec) as bmc:
            await bmc.power.on()
            await bmc.power.wait_for(PowerState.ON, timeout=5, interval=0.05)
            with pytest.raises(DriverError, match="unknown BIOS attribute"):
                await bmc.bios.stage({"NoSuchKnob": 1})
            await bmc.bios.stage(want)
            assert await bmc.bios.pending() == want
            assert await bmc.bios.verify(want) == {"ProcHyperthreading": ("Disabled", "Enabled")}
            await bmc.power.restart()
            await asyncio.sleep(0.3)
            await bmc.power.wait_for(PowerState.ON, timeout=5, interval=0.05)
            assert await bmc.bios.verify(want) == {}
            assert await bmc.bios.pending() == {}

    asyncio.run(body())


CLI_SITE = """\
models:
- {{name: emu, kind: server, vendor: OpenStack, model: sushy-tools fake}}
sites:
- name: emu
  racks:
  - name: rack-emu
    servers:
    - {{name: srv-emu, serial: EMU1, model: emu, position: 1, bmc: '{url}', system_id: {uuid}, credential: env:SUSHY}}
    - {{name: srv-emu-badpw, serial: EMU2, model: emu, position: 2, bmc: '{url}', system_id: {other}, credential: env:SUSHYBAD}}
"""


def test_cli_end_to_end_against_sushy(sushy, tmp_path):
    """The real `fleetctl` against sushy-tools: power, boot, one bad credential.

    The second inventory server has a wrong password: it fails alone, in its
    own row, and no password appears in any output.
    """
    import json

    fleetctl = str(Path(sys.executable).with_name("fleetctl"))
    env = {
        **os.environ,
        "FLEETCTL_DB": str(tmp_path / "inv.db"),
        "FLEETCTL_DATA_DIR": str(tmp_path / "data"),
        "FLEETCTL_LAB_DIR": str(tmp_path / "no-lab"),  # no lab: the inventory's BMC URL is used
        "SUSHY_USERNAME": "admin",
        "SUSHY_PASSWORD": "secret",
        "SUSHYBAD_USERNAME": "admin",
        "SUSHYBAD_PASSWORD": "not-the-secret",
    }

    def run(*args):
        r = subprocess.run([fleetctl, *args], env=env, capture_output=True, text=True, timeout=120, check=False)
        assert "secret" not in r.stdout + r.stderr
        return r

    site = tmp_path / "site.yaml"
    site.write_text(CLI_SITE.format(url=sushy, uuid=SYSTEMS["node-cli"][0], other=SYSTEMS["node-media"][0]))
    r = run("inventory", "import", str(site))
    assert r.returncode == 0, r.stderr

    r = run("power", "status", "rack-emu", "-o", "json")
    assert r.returncode == 1, r.stdout + r.stderr  # one server could not be read
    rows = {x["server"]: x for x in json.loads(r.stdout)}
    assert rows["srv-emu"]["power"] == "off", rows
    assert rows["srv-emu-badpw"]["ok"] is False and "login refused" in rows["srv-emu-badpw"]["error"], rows

    r = run("power", "on", "srv-emu", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    deadline = time.monotonic() + POWER_WAIT
    while True:
        r = run("power", "status", "srv-emu", "-o", "json")
        if json.loads(r.stdout)[0]["power"] == "on":
            break
        assert time.monotonic() < deadline, r.stdout
        time.sleep(0.5)

    r = run("boot", "set", "srv-emu", "--device", "pxe", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr

    async def read_back():
        async with RedfishDriver(tgt(sushy, "node-cli")) as bmc:
            return await bmc.power.state(), (await bmc.boot.get()).device

    assert asyncio.run(read_back()) == (PowerState.ON, BootDevice.PXE)

    r = run("jobs", "list", "-o", "json")  # every run is in the journal
    assert r.returncode == 0, r.stderr
    kinds = [j["kind"] for j in json.loads(r.stdout)]
    assert {"power.status", "power.on", "boot.set"} <= set(kinds), kinds
