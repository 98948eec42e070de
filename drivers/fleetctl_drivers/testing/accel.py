"""The accelerator contract: what every accelerator driver (``fleetctl.interfaces.accel.AccelDriver``) must do.

Checked against two kinds of host, both given by the suite that runs it:

- recorded hosts (:class:`Recording`): a host session whose commands answer
  from recorded tool output (:class:`RecordedHost`: a command line matched by
  a pattern gets that output; bounded as the real session is), and the same
  host made to fail in every way a real one does (the tool exits non-zero,
  prints garbage, prints nothing, prints more than the bound, never ends);
- a stand-in host (:class:`StandIn`): the lab's stand-in tools run on this
  machine (:class:`LocalHost`), with the inventory's boards of that host.

The rules:

- ``kinds`` is a non-empty tuple of board kinds;
- :meth:`~fleetctl.interfaces.accel.AccelDriver.read` never raises for what a
  tool does: a tool that fails, prints garbage or nothing, or passes a bound
  is an entry of ``errors`` (keyed by the tool, its message naming the host),
  never boards made up;
- what it reads is typed and sane (:func:`check_reading`): board names
  unique, serials non-empty or None, temperatures within physical range,
  counters never negative, a PCIe link within what PCIe has;
- the burn-in stages on a healthy stand-in (or on a recording that answers
  every stage) give one observation per inventory board, each present, none
  lost or hung, the workload's own verdict read as a pass, with no error; a
  board the host's tool does not list (an inventory board the host lacks) is
  ``present=False``, never a crash; a stage may refuse to go on only with a
  ``StageError``.

To run it for a driver, subclass :class:`AccelContract` in a test module (the
subclass's name starts with ``Test``)::

    from pathlib import Path
    from fleetctl_drivers.testing.accel import AccelContract, Recording

    DATA = Path(__file__).parent / "data"

    class TestMyAccel(AccelContract):
        driver = MyDriver()
        recordings = [Recording("8-boards", {r"my-smi list": DATA / "list-8.json", r"\\bdmesg\\b": ""}, boards=8)]

        def standin(self, label, tmp_path):  # optional: None (the default) skips the stand-in tests
            return StandIn(LocalHost("sim-01", env={...}), hostvars={...}, boards=[InvBoard("S1", "mykind", 0)])

docs/drivers.md ("Contract suites") says more.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import math
import os
import re
import signal
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from fleetctl import hostio
from fleetctl.interfaces.accel import (
    AccelDriver,
    AccelReading,
    BoardEvent,
    BoardObservation,
    BoardReading,
    BurninJob,
    HostOutcome,
    InvBoard,
    StageError,
    burnin_dir,
)
from fleetctl.interfaces.host import BatchPart, HostTarget

__all__ = ["FAILURES", "PHANTOM_SERIAL", "AccelContract", "Answer", "ContractContext", "LocalHost", "RecordedHost", "Recording",
           "StandIn", "check_reading", "check_survives", "run_stages"]  # fmt: skip

T = TypeVar("T")

# --------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What a recorded host prints for a command: a recorded file or text, its exit status and stderr.

    ``overflows``: the command prints more than the session's bound (the session raises as the real one does);
    ``times_out``: it never ends (``run`` raises past its timeout, ``stream`` reports it timed out).
    """

    stdout: str | Path = ""
    exit_status: int | None = 0
    stderr: str = ""
    overflows: bool = False
    times_out: bool = False

    def text(self) -> str:
        if isinstance(self.stdout, Path):
            return self.stdout.read_bytes().decode("utf-8", errors="replace")  # as the real session decodes
        return self.stdout


#: What a host answers for a command nothing in its table matches: the shell's "not found".
NOT_FOUND = Answer("", 127, "sh: 1: command not found")
_EOL = re.compile(r"\r\n|\r|\n")


class RecordedHost:
    """A :class:`~fleetctl.interfaces.host.HostSession` answering from recorded output, bounded like the real one.

    ``answers``: a regular expression searched in the command line -> its :class:`Answer` (a ``Path`` or text is
    an answer printing it, exit 0); the first that matches answers, the rest get :data:`NOT_FOUND`, or ``default``.
    Every command is kept in ``commands``.
    """

    def __init__(self, name: str, answers: Mapping[str, Answer | Path | str], *, default: Answer = NOT_FOUND) -> None:
        self.target = HostTarget(name=name, address="127.0.0.1")
        self.answers = [(re.compile(k), v if isinstance(v, Answer) else Answer(v)) for k, v in answers.items()]
        self.default = default
        self.commands: list[str] = []

    def answer(self, command: str) -> Answer:
        self.commands.append(command)
        return next((a for pattern, a in self.answers if pattern.search(command)), self.default)

    def _output(self, command: str, a: Answer, *, timeout: float, max_bytes: int) -> hostio.Output:
        if a.times_out:
            raise hostio.HostOutputError(f"did not end within {timeout:g} s; stopped", host=self.target.name, command=command,
                                         timed_out=True)  # fmt: skip
        text = a.text()
        if a.overflows or len(text.encode()) > max_bytes:
            raise hostio.HostOutputError(f"printed more than {max_bytes} bytes, more than any real output; stopped, not read",
                                         host=self.target.name, command=command)  # fmt: skip
        return hostio.Output(stdout=text, stderr=a.stderr, exit_status=a.exit_status)

    async def run(self, command: str, *, timeout: float, max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> hostio.Output:
        return self._output(command, self.answer(command), timeout=timeout, max_bytes=max_bytes)

    async def stream(self, command: str, *, deadline: float, on_line: Callable[[str, str], None]) -> tuple[int | None, bool]:
        a = self.answer(command)
        if a.overflows:
            raise hostio.HostOutputError("printed more than its bound; stopped", host=self.target.name, command=command)
        for stream, text in (("stdout", a.text()), ("stderr", a.stderr)):
            for line in _EOL.split(text):
                if line:
                    on_line(stream, line[: hostio.MAX_LINE_BYTES])
        return (None, True) if a.times_out else (a.exit_status, False)

    async def batch(self, commands: Mapping[str, str], *, timeout: float, max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> dict[str, BatchPart]:
        hostio.batch_script(commands)  # the real session's rules for a batch (its parts' names are identifiers)
        out: dict[str, BatchPart] = {}
        for name, command in commands.items():
            done = self._output(command, self.answer(command), timeout=timeout, max_bytes=max_bytes)
            out[name] = BatchPart(done.stdout, done.exit_status)
        return out


class LocalHost:
    """A :class:`~fleetctl.interfaces.host.HostSession` whose commands run on this machine (``/bin/sh -c``), bounded
    as over SSH: stdout past ``max_bytes`` or a command past its time stops it (its whole process group, and our end
    of its pipes, as closing the SSH channel does) and raises :class:`fleetctl.hostio.HostOutputError`. Output is
    handed on as it arrives and never left in a buffer. For a lab's stand-in tools, with the environment they need."""

    def __init__(self, name: str, *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> None:
        self.target = HostTarget(name=name, address="127.0.0.1")
        self.env = dict(env) if env is not None else None
        self.cwd = cwd

    async def _execute(self, command: str, on_data: Callable[[str, bytes], None], *, deadline: float) -> tuple[int | None, bool]:
        """Run ``command``, handing each piece of stdout/stderr to ``on_data``: (exit status, timed out).

        ``on_data`` raising :class:`~fleetctl.hostio.HostOutputError` stops the command; the error is raised here.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        failed: list[hostio.HostOutputError] = []

        class Protocol(asyncio.SubprocessProtocol):
            def __init__(self) -> None:
                self.open_pipes = {1, 2}
                self.exited = False

            def _check(self) -> None:
                if (failed or (self.exited and not self.open_pipes)) and not done.done():
                    done.set_result(None)

            def pipe_data_received(self, fd: int, data: bytes | str) -> None:
                if failed:
                    return
                try:
                    on_data("stdout" if fd == 1 else "stderr", data if isinstance(data, bytes) else data.encode())
                except hostio.HostOutputError as e:
                    failed.append(e)
                    self._check()

            def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
                self.open_pipes.discard(fd)
                self._check()

            def process_exited(self) -> None:
                self.exited = True
                self._check()

        transport, _ = await loop.subprocess_exec(Protocol, "/bin/sh", "-c", command, stdin=asyncio.subprocess.DEVNULL,
                                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env,
                                                  cwd=self.cwd, start_new_session=True)  # fmt: skip
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(done), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            timed_out = True
        finally:
            if timed_out or failed or transport.get_returncode() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(transport.get_pid(), signal.SIGKILL)  # the group started for this command, by its id
            transport.close()  # our end of its pipes: what is left writing gets SIGPIPE, as when SSH closes a channel
        if failed:
            raise failed[0]
        return (None if timed_out else transport.get_returncode()), timed_out

    async def run(self, command: str, *, timeout: float, max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> hostio.Output:
        out: list[bytes] = []
        err = bytearray()
        size = 0

        def keep(stream: str, data: bytes) -> None:
            nonlocal size
            if stream == "stderr":
                err.extend(data[: max(0, hostio.MAX_STDERR_BYTES - len(err))])
                return
            size += len(data)
            if size > max_bytes:
                raise hostio.HostOutputError(f"printed more than {max_bytes} bytes, more than any real output; stopped, not read",
                                             host=self.target.name, command=command)  # fmt: skip
            out.append(data)

        status, timed_out = await self._execute(command, keep, deadline=time.monotonic() + timeout)
        if timed_out:
            raise hostio.HostOutputError(f"did not end within {timeout:g} s; stopped", host=self.target.name, command=command,
                                         timed_out=True)  # fmt: skip
        return hostio.Output(stdout=b"".join(out).decode("utf-8", errors="replace"), stderr=err.decode("utf-8", errors="replace"),
                             exit_status=status)  # fmt: skip

    async def stream(self, command: str, *, deadline: float, on_line: Callable[[str, str], None]) -> tuple[int | None, bool]:
        rest = {"stdout": "", "stderr": ""}
        # a character split between two pieces of output is decoded whole
        decoders = {k: codecs.getincrementaldecoder("utf-8")(errors="replace") for k in rest}

        def lines(stream: str, data: bytes) -> None:
            *whole, rest[stream] = _EOL.split(rest[stream] + decoders[stream].decode(data))
            for line in whole:
                on_line(stream, line[: hostio.MAX_LINE_BYTES])
            rest[stream] = rest[stream][: hostio.MAX_LINE_BYTES]  # a line without end is cut, as the real session cuts it

        status, timed_out = await self._execute(command, lines, deadline=deadline)
        for stream, line in rest.items():
            if line:
                on_line(stream, line)
        return status, timed_out

    async def batch(self, commands: Mapping[str, str], *, timeout: float, max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> dict[str, BatchPart]:
        script, token = hostio.batch_script(commands)
        done = await self.run(script, timeout=timeout, max_bytes=max_bytes)
        return hostio.parse_batch(done.stdout, token)


# --------------------------------------------------------------------------
# Burn-in stages, run as the core's stage runner runs them
# --------------------------------------------------------------------------


@dataclass
class ContractContext:
    """The :class:`~fleetctl.interfaces.accel.BurninContext` the contract gives a driver's stages (as the core's
    ``fleetctl.burnin.host.StageContext`` does: bounded reads, a failing command a ``StageError`` naming ``what``)."""

    host: Any  # a HostSession (RecordedHost, LocalHost)
    job: BurninJob
    out: HostOutcome = field(default_factory=HostOutcome)
    work: str = ""

    def __post_init__(self) -> None:
        self.work = self.work or burnin_dir(self.job.hostvars)

    async def run(self, cmd: str, *, what: str, timeout: float | None = None, ok_codes: tuple[int, ...] = (0,),
                  max_bytes: int = hostio.MAX_OUTPUT_BYTES) -> str:  # fmt: skip
        t = self.job.command_timeout if timeout is None else timeout
        try:
            done = await self.host.run(cmd, timeout=t, max_bytes=max_bytes)
        except hostio.HostOutputError as e:
            raise StageError(f"{what}: no answer within {t:g} s" if e.timed_out else f"{what}: {e}") from e
        if done.exit_status not in ok_codes:
            err = done.last_error_line()
            raise StageError(f"{what}: exited {done.exit_status}" + (f": {err}" if err else ""))
        return str(done.stdout)

    def in_session(self, body: str) -> str:
        return hostio.session_script(self.work, body)

    async def stop_session(self, what: str) -> str:
        return await self.run(hostio.stop_leftover_script(self.work), what=what)


async def run_stages(driver: AccelDriver, ctx: ContractContext, *, upto: str = "postchecks") -> HostOutcome:
    """The stages in the core's order (prechecks; then, if a board is present, prepare, workload, postchecks), up to
    ``upto``; a ``StageError`` is the outcome's ``error``, anything else raised goes to the test (a broken contract)."""
    out = ctx.out
    try:
        stages = driver.burnin(ctx)
        out.observations = await stages.prechecks()
        if upto == "prechecks" or not any(o.present for o in out.observations):
            return out
        await stages.prepare()
        await stages.workload()
        await stages.postchecks()
    except StageError as e:
        out.error = str(e)
    return out


def make_job(host: Any, kind: str, boards: Sequence[InvBoard], hostvars: Mapping[str, Any], *, seconds: float,
             model: str | None = None, diag_level: int | None = None) -> BurninJob:  # fmt: skip
    return BurninJob(server=host.target.name, target=host.target, hostvars=dict(hostvars), kind=kind, boards=list(boards), model=model,
                     seconds=seconds, grace=30.0, interval=max(0.2, seconds / 4), command_timeout=30.0, board_kind=kind,
                     dcgm_level=diag_level)  # fmt: skip


# --------------------------------------------------------------------------
# What a sane reading is
# --------------------------------------------------------------------------

PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
#: A board's temperature on any real host (C): below is a reading in another unit or a sentinel, above a broken sensor.
TEMP_RANGE = (-40.0, 150.0)
#: The most power one board draws (W): an OAM module draws up to ~1.5 kW; past it a unit was misread.
MAX_POWER_W = 5000.0
_NOT_A_VALUE = ("", "N/A", "[N/A]", "None", "Unknown", "Not Supported", "[Not Supported]")


def _text(value: Any, what: str) -> None:
    assert value is None or (isinstance(value, str) and value and value == value.strip()), f"{what}: {value!r}"
    assert value not in _NOT_A_VALUE, f"{what}: a tool's 'nothing' kept as a value: {value!r}"


def _count(value: Any, what: str) -> None:
    assert value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0), f"{what}: {value!r}"


def _number(value: Any, what: str, low: float, high: float) -> None:
    assert value is None or (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                             and low <= value <= high), f"{what}: {value!r} is not within {low:g}..{high:g}"  # fmt: skip


def check_board(b: BoardReading) -> None:
    """One board's reading: typed, and within what hardware can show."""
    assert isinstance(b, BoardReading), f"{type(b).__name__} is not a BoardReading"
    assert isinstance(b.device, str) and b.device and b.device == b.device.strip(), f"board name {b.device!r}"
    where = b.device
    for f in ("serial", "model"):
        _text(getattr(b, f), f"{where}: {f}")
    assert b.pci_address is None or PCI_ADDRESS.match(b.pci_address), f"{where}: PCI address {b.pci_address!r}"
    _count(b.slot, f"{where}: slot")
    _number(b.temp_c, f"{where}: temperature (C)", *TEMP_RANGE)
    _number(b.power_w, f"{where}: power (W)", 0.0, MAX_POWER_W)
    for f in ("retired_pages", "ecc_corrected", "ecc_uncorrected", "ecc_corrected_total", "ecc_uncorrected_total"):
        _count(getattr(b, f), f"{where}: {f}")
    assert b.retired_pages_pending is None or isinstance(b.retired_pages_pending, bool), f"{where}: {b.retired_pages_pending!r}"
    for f in ("link_gen", "link_gen_max"):
        _count(getattr(b, f), f"{where}: {f}")
        assert getattr(b, f) is None or 1 <= getattr(b, f) <= 7, f"{where}: PCIe gen {getattr(b, f)}"
    for f in ("link_width", "link_width_max"):
        _count(getattr(b, f), f"{where}: {f}")
        assert getattr(b, f) is None or getattr(b, f) in (1, 2, 4, 8, 12, 16, 32), f"{where}: PCIe width x{getattr(b, f)}"
    assert isinstance(b.extra, dict), f"{where}: extra {b.extra!r}"


def check_reading(r: AccelReading, host: str) -> None:
    """A whole reading: typed boards with unique names, a tool named where boards were listed, typed events,
    errors keyed by tool and naming the host."""
    assert isinstance(r, AccelReading), f"{type(r).__name__} is not an AccelReading"
    if r.boards is not None:
        assert isinstance(r.boards, list), r.boards
        for b in r.boards:
            check_board(b)
        names = [b.device for b in r.boards]
        assert len(names) == len(set(names)), f"board names repeat: {names}"
        assert r.tool and isinstance(r.tool, str), "boards listed, but no tool named for the findings"
    if r.device_nodes is not None:
        assert all(isinstance(n, str) and n for n in r.device_nodes), r.device_nodes
    for e in r.events or []:
        assert isinstance(e, BoardEvent), e
        _count(e.code, f"event code of {e.message!r}")
        assert isinstance(e.message, str) and e.message, e
        assert e.critical is None or isinstance(e.critical, bool), e
    for tool, why in r.errors.items():
        assert isinstance(tool, str) and tool.strip(), f"an error keyed by no tool: {r.errors}"
        assert isinstance(why, str) and why.strip(), f"{tool}: an error that says nothing"
        assert host in why, f"{tool}: the error does not name the host {host!r}: {why!r}"


#: Ways a host's tools fail, each answering every command: a tool that exits non-zero, prints garbage, prints
#: nothing, prints past the session's bound, or never ends.
FAILURES: dict[str, Answer] = {
    "fails": Answer("", 1, "contract-tool: cannot open the device: Input/output error"),
    "garbage": Answer("\ufffd\ufffd\x00 Segmentation fault (core dumped)\n}{][ <not:a,reading>\n0x: ==\n\x1b[31m\t;;\n"),
    "nothing": Answer(""),
    "overflows": Answer(overflows=True),
    "times_out": Answer(times_out=True),
}


def check_survives(r: AccelReading, failure: str, host: str) -> None:
    """What ``read`` gave on a host whose every tool fails as ``failure``: sane, and the failure said as an error."""
    check_reading(r, host)
    if failure == "nothing":
        # Nothing printed may mean no board visible: an empty listing, or an error; never boards made up.
        assert r.boards == [] or (r.boards is None and r.errors), f"nothing printed: boards {r.boards}, errors {r.errors}"
        return
    assert r.errors, f"every tool {failure}, and the reading says nothing of it"
    assert not r.boards, f"every tool {failure}, yet boards were listed: {r.boards}"


# --------------------------------------------------------------------------
# What the suite runs against
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    """A host whose tools answer from recorded output (see :class:`RecordedHost` for ``answers``).

    ``boards``: how many boards the read must list (None: not checked); ``hostvars``: the inventory's host variables;
    ``stages``: the answers cover every burn-in stage too (the workload's output, the diagnostic's at ``diag_level``),
    so the stages run on it whole.
    """

    name: str
    answers: Mapping[str, Answer | Path | str]
    boards: int | None = None
    hostvars: Mapping[str, Any] = field(default_factory=dict)
    stages: bool = False
    diag_level: int | None = None

    def host(self) -> RecordedHost:
        return RecordedHost(f"rec-{self.name}", self.answers)

    def missing(self) -> list[str]:
        """Recorded files this row names that are not there."""
        files = [a.stdout if isinstance(a, Answer) else a for a in self.answers.values()]
        return [str(f) for f in files if isinstance(f, Path) and not f.is_file()]


@dataclass
class StandIn:
    """A host whose tools are the lab's stand-ins: its session, host variables and the inventory's boards on it."""

    host: Any  # a HostSession, usually a LocalHost
    hostvars: Mapping[str, Any]
    boards: list[InvBoard]
    model: str | None = None


#: An inventory board no host has: the contract adds it to a host's inventory and wants it ``present=False``.
PHANTOM_SERIAL = "CONTRACT-ABSENT-0"


def phantom(kind: str) -> InvBoard:
    # a slot and a PCI bus no real board of the host sits at, so no driver matches it by place either
    return InvBoard(serial=PHANTOM_SERIAL, kind=kind, slot=99, pci_address="0000:fd:00.0")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# --------------------------------------------------------------------------
# The base test class
# --------------------------------------------------------------------------


class AccelContract:
    """The accelerator contract's tests; a subclass named ``Test...`` gives its driver, recordings and stand-in.

    One driver: set ``driver`` (an instance) and ``recordings``; override :meth:`standin` to give a stand-in host.
    Several (every driver a registry holds): override :meth:`drivers` and :meth:`recordings_of`. Each driver is
    labelled by its first board kind.
    """

    driver: ClassVar[AccelDriver | None] = None
    recordings: ClassVar[Sequence[Recording]] = ()
    #: How long the stand-in's workload runs (seconds, as the job asks; a lab's time scale may shorten it).
    burnin_seconds: ClassVar[float] = 2.0
    #: Seconds a read may take per tool.
    read_timeout: ClassVar[float] = 30.0

    def drivers(self) -> dict[str, AccelDriver]:
        """The drivers under test, by label (the first board kind each serves)."""
        d = self.driver
        return {} if d is None else {(d.kinds[0] if d.kinds else type(d).__name__): d}

    def recordings_of(self, label: str) -> Sequence[Recording]:
        return self.recordings

    def standin(self, label: str, tmp_path: Path) -> StandIn | None:
        """A stand-in host for the driver ``label`` in ``tmp_path``; None: there is none (its tests skip)."""
        return None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Per driver: the failures, each recording, the stand-in tests."""
        drivers = list(self.drivers())
        if "staged" in metafunc.fixturenames:
            metafunc.parametrize(("label", "staged"), [pytest.param(label, r, id=f"{label}-{r.name}") for label in drivers
                                                       for r in self.recordings_of(label) if r.stages])  # fmt: skip
        elif "recording" in metafunc.fixturenames:
            metafunc.parametrize(("label", "recording"), [pytest.param(label, r, id=f"{label}-{r.name}") for label in drivers
                                                          for r in self.recordings_of(label)])  # fmt: skip
        elif "failure" in metafunc.fixturenames:
            metafunc.parametrize(("label", "failure"), [pytest.param(label, f, id=f"{label}-{f}") for label in drivers for f in FAILURES])
        elif "label" in metafunc.fixturenames:
            metafunc.parametrize("label", drivers)

    def _standin(self, label: str, tmp_path: Path) -> StandIn:
        s = self.standin(label, tmp_path)
        if s is None:
            pytest.skip(f"no stand-in host for {label}")
        return s

    def test_kinds(self, label: str) -> None:
        d = self.drivers()[label]
        assert isinstance(d, AccelDriver), f"{type(d).__name__} is not an AccelDriver"
        assert isinstance(d.kinds, tuple) and d.kinds, "a driver serves at least one board kind"
        assert all(isinstance(k, str) and k and k == k.strip() for k in d.kinds), d.kinds

    def test_read_survives_a_failing_tool(self, label: str, failure: str) -> None:
        """A tool that fails, prints garbage or nothing, passes a bound or never ends: an error for that tool, no raise."""
        host = RecordedHost(f"contract-{failure}", {}, default=FAILURES[failure])
        r = _run(self.drivers()[label].read(host, {}, timeout=self.read_timeout))
        check_survives(r, failure, host.target.name)

    def test_read_a_recording(self, label: str, recording: Recording) -> None:
        """Each recorded output reads as sane typed boards (or a clear error for the tool that printed it)."""
        missing = recording.missing()
        if missing:
            pytest.skip(f"recorded output not found: {', '.join(missing)}")
        host = recording.host()
        r = _run(self.drivers()[label].read(host, recording.hostvars, timeout=self.read_timeout))
        check_reading(r, host.target.name)
        if recording.boards is not None:
            assert r.boards is not None and len(r.boards) == recording.boards, f"boards {r.boards}, errors {r.errors}"

    def test_prechecks_on_a_recording_mark_a_missing_board(self, label: str, recording: Recording) -> None:
        """The boards a recording lists are present; an inventory board it does not list is ``present=False``.

        Every listed board is in the inventory (so a driver that matches what is left by place has nothing left for
        the absent one); a board listed without a serial is there under a made-up one, its presence not judged.
        """
        missing = recording.missing()
        if missing:
            pytest.skip(f"recorded output not found: {', '.join(missing)}")
        d = self.drivers()[label]
        kind = d.kinds[0]
        r = _run(d.read(recording.host(), recording.hostvars, timeout=self.read_timeout))
        boards: dict[str, InvBoard] = {}
        unjudged: set[str] = set()
        for b in r.boards or []:
            serial = b.serial or f"CONTRACT-LISTED-{b.device}"
            if not b.serial:
                unjudged.add(serial)
            boards.setdefault(serial, InvBoard(serial=serial, kind=kind, slot=b.slot, pci_address=b.pci_address))
        if len(unjudged) == len(boards):
            pytest.skip("the recording lists no board with a serial to put in an inventory")
        inventory = [*boards.values(), phantom(kind)]
        host = recording.host()
        job = make_job(host, kind, inventory, recording.hostvars, seconds=1)
        self._check_presence(_run(run_stages(d, ContractContext(host, job), upto="prechecks")), inventory, unjudged)

    def test_burnin_on_a_recording(self, label: str, staged: Recording) -> None:
        """A recording that answers every stage: each board the read listed is present, none lost, hung or failed."""
        missing = staged.missing()
        if missing:
            pytest.skip(f"recorded output not found: {', '.join(missing)}")
        d = self.drivers()[label]
        r = _run(d.read(staged.host(), staged.hostvars, timeout=self.read_timeout))
        listed = list(dict.fromkeys(b.serial for b in r.boards or [] if b.serial))
        assert listed, f"a staged recording must list boards with serials (errors: {r.errors})"
        kind = d.kinds[0]
        boards = [InvBoard(serial=s, kind=kind) for s in listed]
        host = staged.host()
        ctx = ContractContext(host, make_job(host, kind, boards, staged.hostvars, seconds=1, diag_level=staged.diag_level))
        out = _run(run_stages(d, ctx))
        self._check_presence(out, boards)
        for o in out.observations:
            assert o.lost is None and not o.hung, o
            assert o.workload_ok is True, f"{o.device}: the recorded workload passed, the driver says {o.workload_ok}: {o.evidence}"

    def test_standin_read(self, label: str, tmp_path: Path) -> None:
        """The stand-in host reads whole: every inventory board listed, no error."""
        s = self._standin(label, tmp_path)
        r = _run(self.drivers()[label].read(s.host, s.hostvars, timeout=self.read_timeout))
        check_reading(r, s.host.target.name)
        assert not r.errors, r.errors
        assert r.boards is not None and len(r.boards) == len(s.boards), r.boards

    def test_standin_burnin_healthy(self, label: str, tmp_path: Path) -> None:
        """Every stage on a healthy stand-in: one observation per inventory board, present, its workload not failed."""
        s = self._standin(label, tmp_path)
        d = self.drivers()[label]
        kind = s.boards[0].kind if s.boards else d.kinds[0]
        ctx = ContractContext(s.host, make_job(s.host, kind, s.boards, s.hostvars, seconds=self.burnin_seconds, model=s.model))
        out = _run(run_stages(d, ctx))
        assert out.error is None, out.error
        self._check_presence(out, s.boards)
        for o in out.observations:
            assert o.lost is None and not o.hung, o
            assert o.workload_ok is True, f"{o.device}: the workload on a healthy board gave {o.workload_ok}: {o.evidence}"

    def test_standin_marks_a_missing_board(self, label: str, tmp_path: Path) -> None:
        """An inventory board the stand-in host does not have is ``present=False``; its own boards are present."""
        s = self._standin(label, tmp_path)
        d = self.drivers()[label]
        kind = s.boards[0].kind if s.boards else d.kinds[0]
        boards = [*s.boards, phantom(kind)]
        ctx = ContractContext(s.host, make_job(s.host, kind, boards, s.hostvars, seconds=self.burnin_seconds, model=s.model))
        self._check_presence(_run(run_stages(d, ctx, upto="prechecks")), boards)

    @staticmethod
    def _check_presence(out: HostOutcome, boards: Sequence[InvBoard], unjudged: set[str] | None = None) -> None:
        """One observation per inventory board, each present but the phantom (and ``unjudged`` ones, either way)."""
        assert out.error is None, out.error
        assert all(isinstance(o, BoardObservation) for o in out.observations)
        got = {o.serial: o.present for o in out.observations}
        assert len(out.observations) == len(boards) and set(got) == {b.serial for b in boards}, \
            f"one observation per inventory board: {sorted(map(str, got))} for {[b.serial for b in boards]}"
        skip = unjudged or set()
        want = {b.serial: b.serial != PHANTOM_SERIAL for b in boards if b.serial not in skip}
        got = {k: v for k, v in got.items() if k not in skip}
        assert got == want, f"present: {got}, want {want}"
