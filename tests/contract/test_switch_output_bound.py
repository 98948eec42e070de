"""A switch that prints without end, or 100x more than a real one, cannot grow fleetctl's memory.

A tiny EOS-like SSH server on loopback (asyncssh, in a thread) answers the
netmiko driver: one command prints forever, one prints 100 copies of the
largest real output the project holds (EOS `show lldp neighbors detail`,
../shared/switch-outputs). The driver stops reading at the platform's
``max_output_bytes`` with an error naming the switch and the command, and
the peak of memory allocated while it reads stays near that bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.switch import NetmikoSwitch
from fleetctl_drivers.switch.driver import OutputTooLarge

from fleetctl.interfaces.switch import SwitchTarget
from tests.alone import in_child

asyncssh = pytest.importorskip("asyncssh")

SHARED = Path(os.environ.get("FLEETCTL_SHARED", Path(__file__).resolve().parents[2].parent / "shared"))
LLDP_DETAIL = SHARED / "switch-outputs" / "arista_eos" / "show_lldp_neighbors_detail" / "arista_eos_show_lldp_neighbors_detail.raw"

PASSWORD = "lab-only-password"
STATUS = (
    "Port       Name   Status       Vlan     Duplex Speed  Type\n"
    "Et1        srv01  connected    100      full   10G    10GBASE-SR\n"
)


class _Answers:
    """What the fake switch prints: a finite text per command, or endless lines."""

    def __init__(self) -> None:
        self.finite: dict[str, str] = {
            "terminal width 511": "Width set to 511 columns.\n",
            "terminal length 0": "Pagination disabled.\n",
            "show interfaces status": STATUS,
        }
        self.endless: set[str] = set()
        self.written = 0  # characters the server managed to send (flow control holds it back)


async def _session(process: Any, answers: _Answers) -> None:
    prompt = "leaf9#"
    process.stdout.write(prompt)
    try:
        while True:
            line = await process.stdin.readline()
            if not line:
                break
            command = line.strip()
            if command in answers.endless:
                chunk = "Et1  a runaway debug line that never stops  0123456789abcdef\n" * 1024
                while True:  # until the client closes the session
                    process.stdout.write(chunk)
                    answers.written += len(chunk)
                    await process.stdout.drain()
            text = answers.finite.get(command, "")
            process.stdout.write(text)
            answers.written += len(text)
            await process.stdout.drain()
            process.stdout.write(prompt)
    except (asyncssh.Error, OSError, ConnectionError, BrokenPipeError):
        pass
    with contextlib.suppress(Exception):
        process.exit(0)


class _Server(asyncssh.SSHServer):  # type: ignore[misc]
    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        return password == PASSWORD


@pytest.fixture(scope="module")
def fake_switch() -> Iterator[tuple[int, _Answers]]:
    answers = _Answers()
    loop = asyncio.new_event_loop()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = asyncssh.generate_private_key("ssh-ed25519")

    async def start() -> Any:
        return await asyncssh.create_server(
            _Server,
            "127.0.0.1",
            port,
            server_host_keys=[key],
            process_factory=lambda p: _session(p, answers),
        )

    server = loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield port, answers
    loop.call_soon_threadsafe(server.close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


@pytest.fixture
def fake(fake_switch: tuple[int, _Answers]) -> tuple[int, _Answers]:
    """The module's server with its answers as they start (a test's endless command ends with it)."""
    port, answers = fake_switch
    answers.endless.clear()
    answers.finite.pop("show lldp neighbors detail", None)
    answers.written = 0
    return port, answers


def _switch(port: int) -> NetmikoSwitch:
    target = SwitchTarget("leaf9", "127.0.0.1", port=port, platform="eos", username="admin", password=PASSWORD, timeout=20)
    return NetmikoSwitch(target)


def test_a_switch_that_prints_forever_is_cut_at_the_bound(fake: tuple[int, _Answers]) -> None:
    port, answers = fake
    answers.endless.add("show lldp neighbors detail")
    sw = _switch(port)
    limit = sw.platform.max_output_bytes

    def measured() -> tuple[str, int]:
        # in a forked child (tests/alone.py): the peak is the driver's, not the fake switch's thread's
        with sw:
            assert sw.interfaces.list()[0].name == "Ethernet1"  # the session works
            tracemalloc.start()
            try:
                with pytest.raises(OutputTooLarge) as err:
                    sw.lldp.neighbors()
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        return str(err.value), peak

    message, peak = in_child(measured)
    assert message.startswith("leaf9: 'show lldp neighbors detail': more than"), message
    # netmiko's buffer, its copies while it looks for the prompt, and one chunk: a few times the bound
    assert peak < 8 * limit, f"peak {peak} for a bound of {limit}"
    # the read stopped: the server is held back by SSH flow control, not drained into memory
    assert answers.written < 20 * limit
    # a new session is opened for the next command (the old one was still printing)
    with sw:
        assert sw.interfaces.list()[0].name == "Ethernet1"


def test_an_answer_100x_the_largest_real_one_is_refused(fake: tuple[int, _Answers]) -> None:
    if not LLDP_DETAIL.is_file():
        pytest.skip(f"{LLDP_DETAIL} absent (set FLEETCTL_SHARED)")
    port, answers = fake
    real = LLDP_DETAIL.read_text()
    answers.finite["show lldp neighbors detail"] = real * 100  # ~2.7 MB for 26 neighbours' 27 kB
    sw = _switch(port)
    assert 10 * len(real) < sw.platform.max_output_bytes < 100 * len(real)
    with sw, pytest.raises(OutputTooLarge, match=r"^leaf9: 'show lldp neighbors detail': more than"):
        sw.lldp.neighbors()


def test_ten_times_the_largest_real_answer_is_still_read(fake: tuple[int, _Answers]) -> None:
    # The bound leaves room: a switch ten times bigger than the largest recording is read whole.
    if not LLDP_DETAIL.is_file():
        pytest.skip(f"{LLDP_DETAIL} absent (set FLEETCTL_SHARED)")
    port, answers = fake
    real = LLDP_DETAIL.read_text()
    answers.finite["show lldp neighbors detail"] = real * 10
    with _switch(port) as sw:
        neighbors = sw.lldp.neighbors()
    assert len(neighbors) == 10 * real.count("Chassis ID     :")
