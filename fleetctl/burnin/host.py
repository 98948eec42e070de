"""The burn-in stages on one host, over one SSH connection.

Per server: stop what a killed burn-in left running; the pre-checks (the
boards the inventory holds are listed by the host tool, device nodes, PCIe
link at its capability, error counters, the exclusive-use locks); reset and
clear each MN-Core board; the workload on every board at once, with
telemetry sampled while it runs; the post-checks (counters, link, boards
still there). What the host said goes into one
:class:`~fleetctl.burnin.verdict.BoardObservation` per board; the verdict is
made elsewhere (``verdict.evaluate``).

The workload runs in a session of its own (``setsid``) whose id is written to
``<burn-in folder>/pgid`` on the host, so that a hung workload is killed as a
whole, and a burn-in killed with its workload still running stops it on the
next run before anything else (the folder is ``fleetctl_burnin_dir``, or
``var/tmp/fleetctl-burnin`` under ``fleetctl_root``, or
``/var/tmp/fleetctl-burnin``).

Nothing here raises for one host: a host that does not answer or a tool that
fails is the outcome's ``error`` (the server gets an ``error`` result, its
boards no verdict).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetctl import hostio
from fleetctl.burnin.verdict import BoardObservation
from fleetctl.hostio import session_script, stop_leftover_script
from fleetctl.interfaces.host import HostTarget

#: What nvidia-smi is asked for before and after the workload.
GPU_CHECK_FIELDS = ("index", "serial", "pci.bus_id", "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
                    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
                    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max")  # fmt: skip
#: ... and while it runs, every interval.
GPU_SAMPLE_FIELDS = ("index", "temperature.gpu", "power.draw", "clocks.sm")
_ERROR_KEYS = {"ecc_corrected_volatile_total": "corrected_ecc", "ecc_uncorrected_volatile_total": "uncorrected_ecc",
               "retired_pages_single_bit": "retired_single_bit", "retired_pages_double_bit": "retired_double_bit"}  # fmt: skip
_GEN_SPEED = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
# What is kept of a host's output (fleetctl.hostio bounds every read): a command's stdout (the largest real one, a
# server's kernel log, is ~1 MB); a workload's output, its beginning and its end (gpu-burn's GPU names, its last
# progress lines and verdicts; its error counts are cumulative, so the last line holds the most, while its best
# Gflop/s is the best of the lines kept); dcgmi's JSON, whole or not at all; a workload's stderr, its end (only lines
# naming a board are shown); telemetry samples per board.
MAX_COMMAND_BYTES = hostio.MAX_OUTPUT_BYTES
WORKLOAD_HEAD_BYTES = 256 << 10
WORKLOAD_TAIL_BYTES = 1 << 20
DCGM_JSON_BYTES = 4 << 20
STDERR_TAIL_BYTES = 256 << 10
MAX_SAMPLES_PER_BOARD = 20_000


@dataclass(frozen=True)
class InvBoard:
    """A board as the inventory holds it."""

    serial: str
    kind: str
    slot: int | None = None
    pci_address: str | None = None
    model: str | None = None


@dataclass
class HostJob:
    server: str
    target: HostTarget  # how to reach its OS (fleetctl.targets.host_target)
    hostvars: dict[str, Any]
    kind: str  # mncore, gpu
    boards: list[InvBoard]
    model: str | None  # the server's hardware model
    seconds: float
    dcgm_level: int | None = None
    grace: float = 60.0  # past the workload's length before it counts as hung
    interval: float = 5.0  # telemetry sampling
    force: bool = False  # reset boards another program holds
    connect_timeout: float = 20.0
    command_timeout: float = 60.0


@dataclass
class HostOutcome:
    error: str | None = None  # the host could not be burned in (no verdict for its boards)
    notes: list[str] = field(default_factory=list)  # server-level facts (a dcgmi setup error, a leftover stopped)
    observations: list[BoardObservation] = field(default_factory=list)
    workload_s: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage


class HostError(Exception):
    """A stage cannot go on for this host; the message says which and why."""


def burnin_dir(hostvars: dict[str, Any]) -> str:
    if hostvars.get("fleetctl_burnin_dir"):
        return str(hostvars["fleetctl_burnin_dir"])
    root = str(hostvars.get("fleetctl_root") or "").rstrip("/")
    return f"{root}/var/tmp/fleetctl-burnin"


def _q(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


async def _run(conn: Any, host: str, cmd: str, timeout: float, *, what: str, ok_codes: tuple[int, ...] = (0,),
               max_bytes: int = MAX_COMMAND_BYTES) -> str:  # fmt: skip
    """stdout of ``cmd``, read within bounds (fleetctl.hostio): more than ``max_bytes`` or past ``timeout`` stops it."""
    try:
        done = await hostio.run(conn, cmd, host=host, timeout=timeout, max_bytes=max_bytes)
    except hostio.HostOutputError as e:
        raise HostError(f"{what}: no answer within {timeout:g} s" if e.timed_out else f"{what}: {e}") from e
    if done.exit_status not in ok_codes:
        err = done.last_error_line()
        raise HostError(f"{what}: exited {done.exit_status}" + (f": {err}" if err else ""))
    return done.stdout


def mncore_pci(device: str) -> str:
    """The PCI address an MN-Core 2 device name stands for (``mnc2p27s0`` -> ``0000:1b:00.0``)."""
    from fleetctl_drivers.accel.mncore import parse_device_name

    bus, _, _ = parse_device_name(device)
    return f"0000:{bus:02x}:00.0"


def match_mncore(boards: list[InvBoard], devices: list[str]) -> dict[str, str | None]:
    """Inventory serial -> host device name: by PCI bus where the inventory knows it, else by slot order."""
    from fleetctl_drivers.accel.mncore import parse_device_name

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


def _link_from_gpu(q: Any) -> dict[str, Any] | None:
    if q.pcie_link_gen_current is None and q.pcie_link_width_current is None:
        return None
    from fleetctl_drivers.accel.pcie import PcieLink

    link = PcieLink(speed_gts=_GEN_SPEED.get(q.pcie_link_gen_current or 0), width=q.pcie_link_width_current,
                    max_speed_gts=_GEN_SPEED.get(q.pcie_link_gen_max or 0), max_width=q.pcie_link_width_max)  # fmt: skip
    return link.model_dump()


def _gpu_errors(q: Any) -> dict[str, int]:
    return {k: int(getattr(q, a)) for a, k in _ERROR_KEYS.items() if getattr(q, a) is not None}


class _Sampler:
    """Samples a tool every interval while the workload runs; each sample's time is from the workload's start.

    At most :data:`MAX_SAMPLES_PER_BOARD` per board: past it every second sample is dropped, so a long run (or a
    workload printing progress without pause) keeps samples over the whole run in bounded memory.
    """

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.samples: dict[str, list[dict[str, Any]]] = {}

    def add(self, key: str, **values: Any) -> None:
        got = self.samples.setdefault(key, [])
        if len(got) >= MAX_SAMPLES_PER_BOARD:
            del got[1::2]
        got.append({"t": round(time.monotonic() - self.t0, 2), "source": "host", **values})


async def burn(job: HostJob) -> HostOutcome:
    """The stages on one host; never raises for what the host does."""
    import asyncssh

    out = HostOutcome()
    try:
        async with hostio.connect(job.target, timeout=job.connect_timeout) as host:
            conn = host.conn
            work = burnin_dir(job.hostvars)
            t = time.monotonic()
            left = await _run(conn, job.server, stop_leftover_script(work), job.command_timeout, what="stopping a leftover burn-in")
            if left.strip():
                out.notes.append(f"a burn-in left running by an earlier run was stopped ({left.strip()})")
            out.stages["cleanup"] = time.monotonic() - t
            if job.kind == "mncore":
                await _mncore(conn, job, out, work)
            else:
                await _gpu(conn, job, out, work)
    except hostio.HostUnreachable as e:
        out.error = str(e)
    except HostError as e:
        out.error = str(e)
    except (OSError, asyncssh.Error) as e:
        out.error = f"ssh {job.target.address}:{job.target.port}: the connection broke: {e or type(e).__name__}"
    return out


# --- MN-Core ----------------------------------------------------------------------------


async def _mncore(conn: Any, job: HostJob, out: HostOutcome, work: str) -> None:
    from fleetctl_drivers.accel import AccelParseError
    from fleetctl_drivers.accel.mncore import mncore_config, parse_gpfn3_list
    from fleetctl_drivers.accel.pcie import parse_sysfs_link

    cfg = mncore_config()
    hv = job.hostvars
    smi = str(hv.get("fleetctl_smi_cmd") or cfg.smi)
    program = str(hv.get("fleetctl_mncore_burnin_cmd") or cfg.burnin.program)
    sem = str(hv.get("fleetctl_mncore_semaphore_dir") or cfg.semaphore_dir)
    sysfs = str(hv.get("fleetctl_sysfs_pci_dir") or "/sys/bus/pci/devices")
    glob = str(hv.get("fleetctl_dev_glob") or f"{cfg.device_dir.rstrip('/')}/mnc2p*")
    t = time.monotonic()
    # One round trip for what the pre-checks read (each SSH command costs a process on the host and a
    # round trip; at 250 hosts that is most of the orchestration): the listing, the nodes, their links, the locks.
    state = _sections(await _run(conn, job.server, _mn_state_script(smi, glob, sysfs, sem, full=True), job.command_timeout,
                                 what="reading the boards (gpfn3-smi list, device nodes, sysfs, locks)"))  # fmt: skip
    rc, listing_text = state.get("rc", "0").strip(), state.get("list", "")
    if rc != "0":
        last = [ln for ln in listing_text.splitlines() if ln.strip()]
        raise HostError(f"{smi} list: exited {rc}" + (f": {last[-1][:200]}" if last else ""))
    try:
        listed = [d.name for d in parse_gpfn3_list(listing_text)]
    except AccelParseError as e:
        raise HostError(f"{smi} list: {e}") from e
    present_nodes = _lines(state.get("nodes", ""))
    devices = [d for d in listed if d in present_nodes]
    mapping = match_mncore(job.boards, devices)
    obs: dict[str, BoardObservation] = {}
    for b in job.boards:
        dev = mapping.get(b.serial)
        obs[b.serial] = BoardObservation(server=job.server, device=dev or f"slot {b.slot}", kind=b.kind, serial=b.serial, slot=b.slot,
                                         model=job.model, present=dev is not None)  # fmt: skip
    out.observations = list(obs.values())
    mine = {o.device: o for o in obs.values() if o.present}
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
        held = ", ".join(f"{d} ({h or 'unknown holder'})" for d, h in sorted(busy.items()))
        raise HostError(f"boards in use by another program: {held}; not reset (give --force to take them)")
    for dev in busy:
        out.notes.append(f"{dev} was in use ({busy[dev]}); taken with --force")
    out.stages["pre-checks"] = time.monotonic() - t

    t = time.monotonic()
    if mine:
        # Reset then clear each board, in one round trip; a board whose reset or clear fails stops the host (its boards'
        # state is unknown), naming the board and the tool's last line.
        script = "; ".join(_reset_clear(smi, d) for d in mine)
        for ln in (await _run(conn, job.server, script, job.command_timeout * 2, what=f"{smi} reset and clear")).splitlines():
            word, _, rest = ln.partition(" ")
            if word == "failed":
                dev, _, why = rest.partition(" ")
                raise HostError(f"{smi} reset/clear {dev} failed" + (f": {why.strip()}" if why.strip() else ""))
    out.stages["reset"] = time.monotonic() - t
    if not mine:
        return

    # The workload: one program per board, all at once, in one session.
    seconds = f"{job.seconds:g}"
    cmds = [_q([program, *(a.format(device=d, seconds=seconds) for a in cfg.burnin.args)]) for d in mine]
    body = " & ".join(cmds) + " & wait"
    result_re, progress_re = cfg.burnin.result_regex(), cfg.burnin.progress_regex()
    t0 = time.monotonic()
    sampler = _Sampler(t0)
    results: dict[str, re.Match[str]] = {}
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

    _, hung = await hostio.stream(conn, session_script(work, body), deadline=t0 + job.seconds + job.grace, on_line=on_line)
    stderr = stderr_kept.lines()
    out.workload_s = time.monotonic() - t0
    out.stages["workload"] = out.workload_s
    if hung:
        await _run(conn, job.server, stop_leftover_script(work), job.command_timeout, what="stopping the hung workload")
    t = time.monotonic()
    after = _sections(await _run(conn, job.server, _mn_state_script(smi, glob, sysfs, sem, full=False), job.command_timeout,
                                 what="reading the boards after the workload"))  # fmt: skip
    after_nodes = _lines(after.get("nodes", ""))
    links_after = _links(after.get("links", ""), parse_sysfs_link, AccelParseError)
    for dev in mine:
        if dev in after_nodes:
            mine[dev].link_after = links_after.get(dev)
    for dev, o in mine.items():
        o.telemetry = sampler.samples.get(dev, [])
        m = results.get(dev)
        if m is not None:
            o.evidence["result"] = m.group(0)
            o.throughput = float(m.group("throughput"))
            o.workload_ok = m.group("verdict").upper() == "PASS" if m.groupdict().get("verdict") else None
            if cfg.burnin.expected_checksum:
                o.checksum_ok = m.group("checksum").lower() == cfg.burnin.expected_checksum.lower()
            elif o.workload_ok is not None:
                o.checksum_ok = o.workload_ok
        elif dev not in after_nodes:
            o.lost = f"{dev}: the device node is gone after the workload" + (f" ({_about(stderr, dev)})" if _about(stderr, dev) else "")
        elif hung:
            o.hung = True
        else:
            o.lost = f"{dev}: no result from the workload" + (f" ({_about(stderr, dev)})" if _about(stderr, dev) else "")
    out.stages["post-checks"] = time.monotonic() - t


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
        parts.append(f"echo @@list; {_q([smi, 'list'])} 2>&1; echo @@rc; echo $?")
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
        f"if out=$({_q([smi, 'reset', dev])} 2>&1) && out=$({_q([smi, 'clear', dev])} 2>&1); then echo {shlex.quote('ok ' + dev)}; "
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


# --- GPUs -------------------------------------------------------------------------------


async def _gpu(conn: Any, job: HostJob, out: HostOutcome, work: str) -> None:
    from fleetctl_drivers.accel import AccelParseError
    from fleetctl_drivers.accel.nvidia import DiagStatus, parse_dcgmi_diag, parse_gpu_burn, parse_query_gpu_csv, parse_xid

    hv = job.hostvars
    nvsmi = str(hv.get("fleetctl_nvidia_smi_cmd") or "nvidia-smi")
    dcgmi = str(hv.get("fleetctl_dcgmi_cmd") or "dcgmi")
    burn_cmd = str(hv.get("fleetctl_gpu_burn_cmd") or "gpu-burn")
    dmesg = str(hv.get("fleetctl_dmesg_cmd") or "dmesg")
    t = time.monotonic()

    async def query(fields: tuple[str, ...]) -> list[Any]:
        text = await _run(conn, job.server, _q([nvsmi, f"--query-gpu={','.join(fields)}", "--format=csv"]), job.command_timeout,
                          what="nvidia-smi --query-gpu")  # fmt: skip
        try:
            return parse_query_gpu_csv(text)
        except AccelParseError as e:
            raise HostError(f"nvidia-smi --query-gpu: {e}") from e

    async def xids() -> list[Any]:
        return parse_xid(await _run(conn, job.server, _q([dmesg]), job.command_timeout, what="dmesg"))

    before = await query(GPU_CHECK_FIELDS)
    xid_before = await xids()
    by_serial = {q.serial: q for q in before if q.serial}
    obs: dict[int, BoardObservation] = {}  # by nvidia-smi index
    boards_out: list[BoardObservation] = []
    for b in sorted(job.boards, key=lambda b: (b.slot if b.slot is not None else 1 << 30, b.serial)):
        q = by_serial.get(b.serial)
        o = BoardObservation(server=job.server, device=f"GPU {q.index}" if q is not None else f"slot {b.slot}", kind=b.kind,
                             serial=b.serial, slot=b.slot, model=job.model, present=q is not None)  # fmt: skip
        boards_out.append(o)
        if q is None or q.index is None:
            continue
        obs[q.index] = o
        o.link_before = _link_from_gpu(q)
        o.errors_before = _gpu_errors(q)
        if q.retired_pages_single_bit is not None or q.retired_pages_double_bit is not None:
            o.retired_pages = (q.retired_pages_single_bit or 0) + (q.retired_pages_double_bit or 0)
    out.observations = boards_out
    out.stages["pre-checks"] = time.monotonic() - t
    if not obs:
        return

    t0 = time.monotonic()
    if job.dcgm_level:
        cmd = session_script(work, _q([dcgmi, "diag", "-r", str(job.dcgm_level), "-j"]))
        lines = hostio.KeptLines(head=DCGM_JSON_BYTES)
        diag = f"dcgmi diag -r {job.dcgm_level} -j"

        def keep(stream: str, line: str) -> None:
            if stream != "stdout":
                return
            lines.add(line)
            if lines.overflowed:  # a JSON document is read whole or not at all: stop reading, and stop dcgmi
                raise hostio.HostOutputError(f"printed more than {DCGM_JSON_BYTES} bytes, more than any real report; "
                                             "stopped, not read", host=job.server, command=diag)  # fmt: skip

        try:
            _, hung = await hostio.stream(conn, cmd, deadline=time.monotonic() + _DCGM_BUDGET.get(job.dcgm_level, 3600) + job.grace,
                                          on_line=keep)  # fmt: skip
        except hostio.HostOutputError as e:
            await _run(conn, job.server, stop_leftover_script(work), job.command_timeout, what="stopping dcgmi")
            raise HostError(str(e)) from e
        if hung:
            # Which GPU hung dcgmi cannot be told from here: a note for the server; gpu-burn next tells the boards apart.
            await _run(conn, job.server, stop_leftover_script(work), job.command_timeout, what="stopping a hung dcgmi")
            out.notes.append(f"dcgmi diag -r {job.dcgm_level} did not end in its time and was stopped")
        else:
            try:
                report = parse_dcgmi_diag(lines.text())
            except AccelParseError as e:
                raise HostError(f"dcgmi diag: {e}") from e
            if report.runtime_error:
                out.notes.append(f"dcgmi diag did not run: {report.runtime_error}")
            for _cat, test, r in report.results:
                ids = r.gpu_ids or ([r.entity_id] if r.entity_id is not None else list(obs))
                msg = "; ".join(w.message for w in r.warnings)
                if r.status not in (DiagStatus.FAIL, DiagStatus.WARN):
                    continue
                if r.setup_error:
                    out.notes.append(f"dcgmi diag {test}: a setup error, not the GPU: {msg}")
                status = "Fail" if r.status == DiagStatus.FAIL else "Warn"
                for i in ids:
                    if i in obs:
                        obs[i].diag.append({"test": test, "status": status, "message": msg, "setup_error": r.setup_error,
                                            "error_ids": [w.error_id for w in r.warnings]})  # fmt: skip
    # gpu-burn on every GPU at once, with nvidia-smi sampled beside it.
    sampler = _Sampler(t0)
    text = hostio.KeptLines(head=WORKLOAD_HEAD_BYTES, tail=WORKLOAD_TAIL_BYTES)
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            try:
                for q in await query(GPU_SAMPLE_FIELDS):
                    if q.index is not None:
                        sampler.add(str(q.index), **{k: v for k, v in (("temp_c", q.temperature_gpu_c), ("power_w", q.power_draw_w),
                                                                      ("clock_mhz", q.clocks_sm_mhz)) if v is not None})  # fmt: skip
            except HostError:
                pass  # a GPU that falls off the bus makes nvidia-smi fail: the workload's result says so
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), job.interval)

    sampling = asyncio.create_task(sample())
    _, hung = await hostio.stream(conn, session_script(work, _q([burn_cmd, f"{job.seconds:g}"])),
                                  deadline=time.monotonic() + job.seconds + job.grace,
                                  on_line=lambda s, ln: text.add(ln) if s == "stdout" else None)  # fmt: skip
    stop.set()
    await sampling
    out.workload_s = time.monotonic() - t0
    out.stages["workload"] = out.workload_s
    if hung:
        await _run(conn, job.server, stop_leftover_script(work), job.command_timeout, what="stopping the hung gpu-burn")
        for o in obs.values():
            o.hung = True
    else:
        try:
            burn_res = parse_gpu_burn(text.text())
        except AccelParseError as e:
            burn_res = None
            for o in obs.values():
                o.lost = f"gpu-burn gave no verdict: {e}"
        if burn_res is not None:
            # gpu-burn numbers the GPUs it sees as CUDA does; the lab and a default CUDA_DEVICE_ORDER=PCI_BUS_ID
            # host number them as nvidia-smi does. ASSUMPTION: the same order (documented).
            for g in burn_res.gpus:
                o2 = obs.get(g.index)
                if o2 is None:
                    continue
                o2.throughput = g.gflops_max
                o2.workload_ok = g.ok
                o2.workload_errors = g.max_errors
                if g.died:
                    o2.lost = f"{o2.device}: gpu-burn marked it DIED"
                o2.evidence["result"] = f"GPU {g.index}: {'OK' if g.ok else 'FAULTY'}, max errors {g.max_errors}"
    t = time.monotonic()
    after = {q.index: q for q in await _safe(query(GPU_CHECK_FIELDS)) if q.index is not None}
    xid_after = await xids()
    seen = {(x.pci.lower(), x.xid, x.message) for x in xid_before}
    for i, o in obs.items():
        o.telemetry = sampler.samples.get(str(i), [])
        q = after.get(i)
        if q is None:
            o.lost = o.lost or f"{o.device}: nvidia-smi no longer lists it after the workload"
        else:
            o.link_after = _link_from_gpu(q)
            o.errors_after = _gpu_errors(q)
        bus = (before_bus := next((b.pci_bus_id for b in before if b.index == i), None)) and _bus_of(before_bus)
        for x in xid_before + xid_after:
            if bus and _bus_of(x.pci) == bus:
                when = "since boot" if (x.pci.lower(), x.xid, x.message) in seen else "during the run"
                line = f"Xid {x.xid} ({when}): {x.message}"
                if line not in o.xids:
                    o.xids.append(line)
    out.stages["post-checks"] = time.monotonic() - t


# dcgmi diag levels take about this long on real GPUs (DOMAIN.md: r1 seconds, r2 ~2 min, r3 ~15 min, r4 longer).
_DCGM_BUDGET = {1: 120.0, 2: 600.0, 3: 2400.0, 4: 7200.0}


def _bus_of(pci: str) -> str:
    """``00000000:3B:00.0`` and ``0000:3b:00`` -> ``3b``: the bus, how nvidia-smi and the kernel both name it."""
    parts = pci.lower().split(":")
    return parts[-2] if len(parts) >= 2 else pci.lower()


async def _safe(coro: Any) -> list[Any]:
    try:
        return list(await coro)
    except HostError:
        return []
