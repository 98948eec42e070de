"""MN-Core boards as the host sees them: ``gpfn3-smi list`` and the facts kept as data.

What is public (MN-Core SDK documentation, "advanced features"):
``gpfn3-smi list`` prints one ``<index>: <device name>`` line per board, e.g.
``0: mnc2p27s0`` to ``7: mnc2p188s0`` on an eight-board MN-Core 2 node; the
device name is ``mnc2p<bus>s<n>`` and its node ``/dev/mnc2p<bus>s<n>``.

The index is NOT a board's identity: the platform can change which devices
are available, and with them which index names which board. fleetctl keys a
board by its device name (and by its serial where a tool reports one), never
by index; the index is kept only to pass back to ``gpfn3-smi`` in the same
breath as the listing it came from.

What is not public (PCI ids, firmware component names, a burn-in program and
its output) is in ``mncore.yaml`` beside this module, loaded by
:func:`mncore_config`; every value there is marked as an assumption.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field

from fleetctl import hostio
from fleetctl.interfaces.accel import (
    AccelBurnin,
    AccelDriver,
    AccelReading,
    BoardObservation,
    BoardReading,
    BurninContext,
    InvBoard,
    Sampler,
    StageError,
    quote_argv,
)
from fleetctl.interfaces.host import HostSession
from fleetctl_drivers.accel import AccelParseError
from fleetctl_drivers.accel.pcie import ParseError, PcieLink, parse_sysfs_link

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "MnCoreConfig",
    "MnCoreDevice",
    "ParseError",
    "PcieLink",
    "mncore_config",
    "parse_device_name",
    "parse_gpfn3_list",
    "parse_sysfs_link",
]

DEFAULT_CONFIG_FILE = Path(__file__).with_name("mncore.yaml")
CONFIG_ENV = "FLEETCTL_MNCORE_CONFIG"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MnCoreDevice(_Model):
    """One board in a ``gpfn3-smi list`` listing.

    ``index`` is valid only together with the listing it came from (see the
    module docstring); ``name`` is the board's identity on the host.
    """

    index: int
    name: str  # mnc2p27s0
    pci_bus: int  # 27: the bus number, decimal as the name writes it
    slot: int  # the n of ...s<n>
    device_node: str  # /dev/mnc2p27s0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pci_bus_hex(self) -> str:
        """The bus as lspci and sysfs write it (27 -> ``1b``), to find the board in ``lspci`` output."""
        return f"{self.pci_bus:02x}"


# mnc2 = MN-Core 2. The public documentation shows only MN-Core 2 names.
_NAME = re.compile(r"mnc2p(?P<bus>\d+)s(?P<slot>\d+)")
_LIST_LINE = re.compile(r"(?P<index>\d+):\s*(?P<name>\S+)")


def parse_device_name(name: str, *, device_dir: str = "/dev") -> tuple[int, int, str]:
    """``mnc2p27s0`` -> (bus 27, slot 0, ``/dev/mnc2p27s0``).

    Raises:
        ParseError: not an MN-Core 2 device name.
    """
    m = _NAME.fullmatch(name.strip())
    if not m:
        raise ParseError(f"not an MN-Core 2 device name: {name!r} (expected mnc2p<bus>s<n>, e.g. mnc2p27s0)")
    bus = int(m.group("bus"))
    if bus > 255:
        raise ParseError(f"MN-Core device name {name!r}: bus {bus} is beyond 255")
    return bus, int(m.group("slot")), f"{device_dir.rstrip('/')}/{m.group(0)}"


def parse_gpfn3_list(text: str, *, device_dir: str = "/dev") -> list[MnCoreDevice]:
    """The boards in ``gpfn3-smi list`` output (``<index>: <device name>`` per line).

    Blank lines are skipped; no lines at all is an empty list (a node with no
    board visible), not an error: whether that is a problem is the caller's
    call (it knows how many boards the server should hold).

    Args:
        text: the whole output.
        device_dir: where the device nodes are (``/dev``).

    Returns:
        The boards in the order listed.

    Raises:
        ParseError: a line in any other format, a name that is not an MN-Core
            2 device name, or an index or name listed twice; the message names
            the line.
    """
    devices: list[MnCoreDevice] = []
    seen_index: dict[int, int] = {}
    seen_name: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _LIST_LINE.fullmatch(line)
        if not m:
            raise ParseError(f"gpfn3-smi list line {n}: expected '<index>: <device name>', got {line[:120]!r}")
        index, name = int(m.group("index")), m.group("name")
        try:
            bus, slot, node = parse_device_name(name, device_dir=device_dir)
        except ParseError as e:
            raise ParseError(f"gpfn3-smi list line {n}: {e.message}") from e
        if index in seen_index:
            raise ParseError(f"gpfn3-smi list line {n}: index {index} already listed on line {seen_index[index]}")
        if name in seen_name:
            raise ParseError(f"gpfn3-smi list line {n}: device {name} already listed on line {seen_name[name]}")
        seen_index[index], seen_name[name] = n, n
        devices.append(MnCoreDevice(index=index, name=name, pci_bus=bus, slot=slot, device_node=node))
    return devices


# ------------------------------------------------------------ configuration


class MnCorePciId(_Model):
    generation: str
    vendor_id: str
    device_id: str


class MnCoreBurnin(_Model):
    program: str = "/opt/pfn/pfcomp/bin/mncore-burnin"
    args: list[str] = Field(default_factory=lambda: ["--device", "{device}", "--seconds", "{seconds}"])
    result_pattern: str = ""
    # progress lines while it runs; named groups: device, temp_c (and optionally power_w, clock_mhz)
    progress_pattern: str = ""
    expected_checksum: str | None = None

    def result_regex(self) -> re.Pattern[str] | None:
        return re.compile(self.result_pattern) if self.result_pattern else None

    def progress_regex(self) -> re.Pattern[str] | None:
        return re.compile(self.progress_pattern) if self.progress_pattern else None


class MnCoreClock(_Model):
    core_mhz: int = 750
    gddr6_mhz: int = 15000


class MnCoreConfig(_Model):
    """The MN-Core facts fleetctl assumes (see ``mncore.yaml`` for which are assumptions)."""

    smi: str = "gpfn3-smi"
    device_dir: str = "/dev"
    semaphore_dir: str = "/opt/mncore_shared_semaphore"
    pci_ids: list[MnCorePciId] = Field(default_factory=list)
    firmware_components: list[str] = Field(default_factory=list)
    burnin: MnCoreBurnin = Field(default_factory=MnCoreBurnin)
    clock: MnCoreClock = Field(default_factory=MnCoreClock)
    source: str = Field("", description="the file these were read from")


def mncore_config(path: str | os.PathLike[str] | None = None) -> MnCoreConfig:
    """The MN-Core facts from ``path``, ``$FLEETCTL_MNCORE_CONFIG``, or the bundled ``mncore.yaml``.

    Raises:
        ParseError: the file is missing, not YAML, or has unknown keys or wrong
            types (a typo must not silently fall back to a default).
    """
    import yaml

    file = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE)
    try:
        data: Any = yaml.safe_load(file.read_text())
    except OSError as e:
        raise ParseError(f"{file}: cannot read the MN-Core configuration: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise ParseError(f"{file}: not valid YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParseError(f"{file}: expected a mapping of settings, got {type(data).__name__}")
    try:
        cfg = MnCoreConfig.model_validate({**data, "source": str(file)})
        cfg.burnin.result_regex()
        cfg.burnin.progress_regex()
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ParseError(f"{file}: {where}: {first['msg']}") from e
    except re.error as e:
        raise ParseError(f"{file}: burnin.result_pattern or progress_pattern is not a regular expression: {e}") from e
    return cfg


# --- the driver: MN-Core boards on a host, for burn-in and the sweep ------------------------------------------------
# (The core reaches it through the ``fleetctl.accel`` entry points, keyed by board kind: mncore2, mncore.)

#: What is kept of the workload's stderr: its end (only lines naming a board are shown).
STDERR_TAIL_BYTES = 256 << 10
#: The most stdout kept per tool in the sweep's read (a listing of 8 boards is a few hundred bytes).
MAX_TOOL_BYTES = 1 << 20


def mncore_pci(device: str) -> str:
    """The PCI address an MN-Core 2 device name stands for (``mnc2p27s0`` -> ``0000:1b:00.0``)."""
    bus, _, _ = parse_device_name(device)
    return f"0000:{bus:02x}:00.0"


def match_mncore(boards: list[InvBoard], devices: list[str]) -> dict[str, str | None]:
    """Inventory serial -> host device name: by PCI bus where the inventory knows it, else by slot order."""
    by_bus: dict[int, list[str]] = {}
    for d in sorted(devices, key=lambda d: parse_device_name(d)[:2]):
        by_bus.setdefault(parse_device_name(d)[0], []).append(d)
    out: dict[str, str | None] = {}
    unmatched: list[InvBoard] = []
    for b in sorted(boards, key=lambda b: (b.slot if b.slot is not None else 1 << 30, b.serial)):
        try:
            bus = int((b.pci_address or "").split(":")[1], 16)
        except (IndexError, ValueError):
            unmatched.append(b)
            continue
        free = by_bus.get(bus) or []
        out[b.serial] = free.pop(0) if free else None
    rest = [d for ds in by_bus.values() for d in ds]
    for b in unmatched:
        out[b.serial] = rest.pop(0) if rest else None
    return out



class MnCoreStages(AccelBurnin):
    """The MN-Core stages on one host: pre-checks in one round trip, reset and clear, the workload per board, post-checks."""

    def __init__(self, ctx: BurninContext) -> None:
        super().__init__(ctx)
        self.cfg = cfg = mncore_config()
        hv = ctx.job.hostvars
        self.smi = str(hv.get("fleetctl_smi_cmd") or cfg.smi)
        self.program = str(hv.get("fleetctl_mncore_burnin_cmd") or cfg.burnin.program)
        self.sem = str(hv.get("fleetctl_mncore_semaphore_dir") or cfg.semaphore_dir)
        self.sysfs = str(hv.get("fleetctl_sysfs_pci_dir") or "/sys/bus/pci/devices")
        self.glob = str(hv.get("fleetctl_dev_glob") or f"{cfg.device_dir.rstrip('/')}/mnc2p*")
        self.mine: dict[str, BoardObservation] = {}  # present boards by device name
        self.hung = False
        self.results: dict[str, re.Match[str]] = {}
        self.stderr: list[str] = []
        self.sampler = Sampler(time.monotonic())

    async def prechecks(self) -> list[BoardObservation]:
        ctx, job, out, smi = self.ctx, self.ctx.job, self.ctx.out, self.smi
        # One round trip for what the pre-checks read (each SSH command costs a process on the host and a
        # round trip; at 250 hosts that is most of the orchestration): the listing, the nodes, their links, the locks.
        state = _sections(await ctx.run(_mn_state_script(smi, self.glob, self.sysfs, self.sem, full=True),
                                        what="reading the boards (gpfn3-smi list, device nodes, sysfs, locks)"))  # fmt: skip
        rc, listing_text = state.get("rc", "0").strip(), state.get("list", "")
        if rc != "0":
            last = [ln for ln in listing_text.splitlines() if ln.strip()]
            raise StageError(f"{smi} list: exited {rc}" + (f": {last[-1][:200]}" if last else ""))
        try:
            listed = [d.name for d in parse_gpfn3_list(listing_text)]
        except AccelParseError as e:
            raise StageError(f"{smi} list: {e}") from e
        present_nodes = _lines(state.get("nodes", ""))
        devices = [d for d in listed if d in present_nodes]
        mapping = match_mncore(job.boards, devices)
        obs: dict[str, BoardObservation] = {}
        for b in job.boards:
            dev = mapping.get(b.serial)
            obs[b.serial] = BoardObservation(server=job.server, device=dev or f"slot {b.slot}", kind=b.kind, serial=b.serial,
                                             slot=b.slot, model=job.model, present=dev is not None)  # fmt: skip
        self.mine = mine = {o.device: o for o in obs.values() if o.present}
        links_before = _links(state.get("links", ""), parse_sysfs_link, AccelParseError)
        for dev, o in mine.items():
            o.link_before = links_before.get(dev)
        # The exclusive-use folder: a board held by a live program is not ours to reset (unless --force).
        busy = {}
        for ln in state.get("locks", "").splitlines():
            st, _, rest = ln.partition(" ")
            dev, _, holder = rest.partition(" ")
            if st == "busy" and dev in mine:
                busy[dev] = holder.strip()
        if busy and not job.force:
            out.observations = list(obs.values())
            held = ", ".join(f"{d} ({h or 'unknown holder'})" for d, h in sorted(busy.items()))
            raise StageError(f"boards in use by another program: {held}; not reset (give --force to take them)")
        for dev in busy:
            out.notes.append(f"{dev} was in use ({busy[dev]}); taken with --force")
        return list(obs.values())

    async def prepare(self) -> None:
        """Reset then clear each board, in one round trip; a board whose reset or clear fails stops the host (its boards'
        state is unknown), naming the board and the tool's last line."""
        smi = self.smi
        script = "; ".join(_reset_clear(smi, d) for d in self.mine)
        for ln in (await self.ctx.run(script, timeout=self.ctx.job.command_timeout * 2, what=f"{smi} reset and clear")).splitlines():
            word, _, rest = ln.partition(" ")
            if word == "failed":
                dev, _, why = rest.partition(" ")
                raise StageError(f"{smi} reset/clear {dev} failed" + (f": {why.strip()}" if why.strip() else ""))

    async def workload(self) -> None:
        """One program per board, all at once, in one session; its result and progress lines read as they come."""
        ctx, job, cfg, mine = self.ctx, self.ctx.job, self.cfg, self.mine
        seconds = f"{job.seconds:g}"
        cmds = [quote_argv([self.program, *(a.format(device=d, seconds=seconds) for a in cfg.burnin.args)]) for d in mine]
        body = " & ".join(cmds) + " & wait"
        result_re, progress_re = cfg.burnin.result_regex(), cfg.burnin.progress_regex()
        t0 = time.monotonic()
        self.sampler = sampler = Sampler(t0)
        results = self.results
        stderr_kept = hostio.KeptLines(head=0, tail=STDERR_TAIL_BYTES)

        def on_line(stream: str, line: str) -> None:
            line = line.strip()
            if not line:
                return
            m = result_re.match(line) if result_re else None
            if m and m.group("device") in mine:
                results[m.group("device")] = m
                return
            p = progress_re.match(line) if progress_re else None
            if p and p.group("device") in mine:
                g = p.groupdict()
                sampler.add(p.group("device"), **{k: float(g[k]) for k in ("temp_c", "power_w", "clock_mhz") if g.get(k)})
                return
            if stream == "stderr":
                stderr_kept.add(line)

        _, self.hung = await ctx.host.stream(ctx.in_session(body), deadline=t0 + job.seconds + job.grace, on_line=on_line)
        self.stderr = stderr_kept.lines()
        ctx.out.workload_s = time.monotonic() - t0
        if self.hung:
            await ctx.stop_session("stopping the hung workload")

    async def postchecks(self) -> None:
        ctx, cfg, mine, stderr = self.ctx, self.cfg, self.mine, self.stderr
        after = _sections(await ctx.run(_mn_state_script(self.smi, self.glob, self.sysfs, self.sem, full=False),
                                        what="reading the boards after the workload"))  # fmt: skip
        after_nodes = _lines(after.get("nodes", ""))
        links_after = _links(after.get("links", ""), parse_sysfs_link, AccelParseError)
        for dev in mine:
            if dev in after_nodes:
                mine[dev].link_after = links_after.get(dev)
        for dev, o in mine.items():
            o.telemetry = self.sampler.samples.get(dev, [])
            m = self.results.get(dev)
            about = _about(stderr, dev)
            if m is not None:
                o.evidence["result"] = m.group(0)
                o.throughput = float(m.group("throughput"))
                o.workload_ok = m.group("verdict").upper() == "PASS" if m.groupdict().get("verdict") else None
                if cfg.burnin.expected_checksum:
                    o.checksum_ok = m.group("checksum").lower() == cfg.burnin.expected_checksum.lower()
                elif o.workload_ok is not None:
                    o.checksum_ok = o.workload_ok
            elif dev not in after_nodes:
                o.lost = f"{dev}: the device node is gone after the workload" + (f" ({about})" if about else "")
            elif self.hung:
                o.hung = True
            else:
                o.lost = f"{dev}: no result from the workload" + (f" ({about})" if about else "")


def board_reading(d: MnCoreDevice) -> BoardReading:
    """A board of ``gpfn3-smi list`` as the core judges boards: its name and slot (the listing says nothing more)."""
    return BoardReading(device=d.name, slot=d.slot, extra={"pci_bus": d.pci_bus, "device_node": d.device_node})


class MnCoreDriver(AccelDriver):
    """MN-Core boards (``mncore2``, ``mncore``): ``gpfn3-smi``, the device nodes, sysfs and the exclusive-use folder."""

    kinds = ("mncore2", "mncore")
    criteria_file = Path(__file__).with_name("mncore.criteria.yaml")

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        """``gpfn3-smi list`` (the boards) and the device nodes present, each on its own (the listing gives no counters)."""
        name = host.target.name
        cfg = mncore_config()  # the same tool and device folder as burn-in (a site's copy of mncore.yaml included)
        smi = str(hostvars.get("fleetctl_smi_cmd") or cfg.smi)
        glob = str(hostvars.get("fleetctl_dev_glob") or f"{cfg.device_dir.rstrip('/')}/mnc2p*")
        r = AccelReading()

        async def nodes() -> list[str]:
            out = await _tool(host, ["sh", "-c", f'for f in {glob}; do [ -e "$f" ] && echo "$f"; done; true'], timeout)
            return [ln for ln in out.splitlines() if ln.strip()]

        async def smi_list() -> list[MnCoreDevice]:
            return parse_gpfn3_list(await _tool(host, [smi, "list"], timeout))

        listed: list[MnCoreDevice] | None
        listed, r.device_nodes = await asyncio.gather(_part(r, name, "gpfn3-smi", smi_list()),
                                                      _part(r, name, "device nodes", nodes()))  # fmt: skip
        r.tool = "gpfn3-smi"
        r.boards = None if listed is None else [board_reading(d) for d in listed]
        return r

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        return MnCoreStages(ctx)


async def _tool(host: HostSession, argv: list[str], timeout: float, *, max_bytes: int = MAX_TOOL_BYTES) -> str:
    """A tool's stdout (bounded); a status other than 0 raises, naming the tool and its last line."""
    done = await host.run(quote_argv(argv), timeout=timeout, max_bytes=max_bytes)
    if done.exit_status != 0:
        err = done.last_error_line()
        raise RuntimeError(f"`{argv[0]}` exited {done.exit_status}" + (f": {err}" if err else ""))
    return done.stdout


async def _part(r: AccelReading, name: str, label: str, coro: Awaitable[Any]) -> Any:
    """One part of a sweep's read: a tool that fails or prints what its parser refuses is that part's error, not the host's."""
    try:
        return await coro
    except Exception as e:  # noqa: BLE001 - that part's finding
        r.errors[label] = str(e) if isinstance(e, hostio.HostOutputError) else f"{name}: {e}"  # the former names the host
        return None


# --- MN-Core state in one round trip ------------------------------------------------------

_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def _mn_state_script(smi: str, glob: str, sysfs: str, sem: str, *, full: bool) -> str:
    """A shell script printing sections (``@@name`` lines): list and rc (full), nodes, links, locks (full).

    The link of each device node is read from ``<sysfs>/<PCI address>/``, the address made from the public
    device name (``mnc2p27s0`` is bus 27: ``0000:1b:00.0``).
    """
    q = shlex.quote
    parts = []
    if full:
        parts.append(f"echo @@list; {quote_argv([smi, 'list'])} 2>&1; echo @@rc; echo $?")
    parts.append(f'echo @@nodes; for f in {glob}; do [ -e "$f" ] && echo "${{f##*/}}"; done')
    parts.append(f'echo @@links; for f in {glob}; do [ -e "$f" ] || continue; n=${{f##*/}}; b=${{n#mnc2p}}; b=${{b%%s*}}; '
                 f'case $b in ""|*[!0-9]*) continue;; esac; a=$(printf "0000:%02x:00.0" "$b"); '
                 f'for k in {" ".join(_LINK_FILES)}; do printf "%s %s=" "$n" "$k"; '
                 f'cat {q(sysfs)}/"$a"/"$k" 2>/dev/null || echo; done; done')  # fmt: skip
    if full:
        # ASSUMPTION: one entry per board named after its device, holding "<program> pid <n>" (the layout is not public).
        # Live: signalable and not a zombie (a killed holder can linger as one until reaped).
        parts.append(f'echo @@locks; if [ -d {q(sem)} ]; then for f in {q(sem)}/*; do [ -e "$f" ] || continue; '
                     f'pid=$(sed -n "s/.*pid \\([0-9][0-9]*\\).*/\\1/p" "$f" | head -n1); '
                     f'st=$(sed -n "s/^State:[[:space:]]*\\(.\\).*/\\1/p" /proc/"$pid"/status 2>/dev/null); '
                     f'if [ -n "$pid" ] && env kill -0 "$pid" 2>/dev/null && [ "$st" != Z ]; then '
                     f'echo "busy ${{f##*/}} $(head -c 200 "$f")"; else echo "stale ${{f##*/}}"; fi; done; fi')  # fmt: skip
    return "; ".join(parts) + "; true"


def _reset_clear(smi: str, dev: str) -> str:
    """Reset then clear one board; prints ``ok DEV`` or ``failed DEV <the tool's last line>``."""
    return (
        f"if out=$({quote_argv([smi, 'reset', dev])} 2>&1) && out=$({quote_argv([smi, 'clear', dev])} 2>&1); "
        f"then echo {shlex.quote('ok ' + dev)}; "
        f'else echo {shlex.quote("failed " + dev)} "$(printf \'%s\' "$out" | tail -n 1 | head -c 200)"; fi'
    )


def _sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for ln in text.splitlines():
        if ln.startswith("@@") and ln[2:].isidentifier():
            current = out.setdefault(ln[2:], [])
        elif current is not None:
            current.append(ln)
    return {k: "\n".join(v) + "\n" for k, v in out.items()}


def _lines(text: str) -> set[str]:
    return {ln.strip() for ln in text.splitlines() if ln.strip()}


def _links(text: str, parse: Callable[..., Any], error: type[Exception]) -> dict[str, dict[str, Any] | None]:
    """``<device> <file>=<value>`` lines -> the device's PcieLink as a dict (None: no sysfs entry, so not known)."""
    got: dict[str, dict[str, str]] = {}
    for ln in text.splitlines():
        dev, _, rest = ln.partition(" ")
        k, _, v = rest.partition("=")
        got.setdefault(dev, {})[k] = v.strip()
    res: dict[str, dict[str, Any] | None] = {}
    for dev, f in got.items():
        if not any(f.values()):
            res[dev] = None
            continue
        try:
            res[dev] = parse(*(f.get(k, "") for k in _LINK_FILES)).model_dump()
        except error:
            res[dev] = None
    return res


def _about(lines: list[str], device: str) -> str:
    hits = [ln for ln in lines if device in ln]
    return hits[-1][:200] if hits else ""
