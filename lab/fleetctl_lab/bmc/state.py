"""The state of one simulated BMC and the server behind it.

Time-driven changes (power transitions, firmware tasks) are computed lazily:
an action schedules phases with end times, and ``settle(now)`` applies every
phase that has ended, at the time it ended. No timer runs per BMC, so 10,000
idle BMCs cost nothing, and timestamps in the power timeline are exact.

Power transition table (``PowerState`` during -> after; effects):

  On              Off  -> PoweringOn -> On            power drawn from the start; boot at the end
  ForceOff        any  -> PoweringOff -> Off          power stops at the end
  GracefulShutdown On  -> PoweringOff (longer) -> Off
  ForceRestart,
  GracefulRestart,
  PowerCycle      On   -> PoweringOff -> PoweringOn -> On   (a power cycle)
  PowerCycle      Off  -> as On

At each boot (end of PoweringOn) the lab consumes a ``Once`` boot override,
applies pending BIOS settings and records the boot source.

The host behind the BMC (``fleetctl_lab.hosts.HostState``) follows: a boot
from the network or from inserted virtual media installs an OS for
``install_s``, a boot from disk brings an installed OS up after
``os_boot_s``, and the start of any power-off phase takes the host down. Its
phase is computed lazily too (``host_info``).
"""

from __future__ import annotations

import itertools
import math
import random
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fleetctl_lab.bmc.flavours import FLAVOURS, Flavour
from fleetctl_lab.bmc.spec import LabConfig, LabServerSpec
from fleetctl_lab.hosts import HostState, fault_count

POWER_RESETS = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle")

# Every fault a lab BMC understands, with what "on" means when given True.
FAULTS: dict[str, str] = {
    "latency_ms": "delay every request by this many milliseconds",
    "error_rate": "fraction (0..1) of requests answered with a 5xx",
    "hang": "requests are never answered (True) until the fault is cleared",
    "drop": "fraction (0..1, True = 1) of connections closed without an answer",
    "session_limit": "at most this many sessions open at once (True = none): a new login beyond is refused 503 SessionLimitExceeded",
    "psu_failed": "index of the PSU that failed (True = 0)",
    "fan_failed": "index of the fan that failed (True = 0)",
    "hot_sensor": "name or index of the temperature that runs hot (True = 0)",
    "pcie_degraded": "{'slot': n, 'lanes': 8, 'gen': 'Gen3'} or a slot number or True (first board)",
    "memory_errors": "correctable memory errors on a DIMM (count; True = 1): health Warning + log entry",
    "firmware_fail": "SimpleUpdate tasks end in Exception (True) or the next N do (int)",
    "push_only": "the UpdateService offers no SimpleUpdate, only the MultipartHttpPushUri (True): a BMC that cannot pull",
    "clock_skew_s": "seconds added to the Manager DateTime",
    "device_missing": "accelerator device nodes (count; True = 1) absent on the host from its next boot: the last n boards",
    "wrong_cert": "new TLS connections get a freshly generated self-signed certificate (another key), not the pinned one (True)",
    "nextlink_loop": "collections are served a page at a time and the last page's Members@odata.nextLink points back to "
                     "an earlier page (True: every collection; a name such as 'Processors': the collections so named)",
    "nextlink_forever": "collections page forever: every page repeats members and links a new $skip "
                        "(True: every collection; a name: the collections so named)",
    "sensors_absent": "while the server is not on, its temperatures read Status.State Absent, reading 0, "
                      "thresholds 0 (True), as the ilo6 flavour always does",
    "board_no_serial": "the board in this slot (True: the last board) is shown with no SerialNumber",
}

# The only documents that show the open sessions: answers under it are rendered every time.
SESSIONS_SHOWN_UNDER = "/redfish/v1/SessionService/Sessions"

# Faults that shape the document itself request by request (a page that depends on the request's $skip
# and counts what it served): while one is set, no GET of that BMC is answered from the pre-rendered
# documents (server.py). The faults that decide a request's fate (latency_ms, error_rate, hang, drop) are
# drawn for every request before any answer, pre-rendered or not, is looked at; the others are state:
# setting them changes the BMC's version, so the documents are rendered anew.
PER_REQUEST_FAULTS = frozenset({"nextlink_loop", "nextlink_forever"})

# Faults whose value 0 means something (an index or a slot), not "clear".
_ZERO_IS_A_VALUE = ("psu_failed", "fan_failed", "hot_sensor", "pcie_degraded", "board_no_serial")

BOOT_DEFAULT = "Hdd"

DEFAULT_BIOS: dict[str, Any] = {
    "BootMode": "Uefi",
    "ProcTurboMode": "Enabled",
    "ProcHyperthreading": "Enabled",
    "SriovGlobalEnable": "Enabled",
    "Above4GDecoding": "Enabled",
    "PcieAspm": "Disabled",
    "WorkloadProfile": "GeneralPowerEfficientCompute",
    "PowerRegulator": "DynamicPowerSavings",
    "NumaNodesPerSocket": 1,
    "PxeRetryCount": 3,
    "IommuEnabled": True,
}


class LabActionError(Exception):
    """An action the lab BMC refuses; rendered as a Redfish error body."""

    def __init__(self, status: int, message_id: str, message: str, args: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message_id = message_id
        self.message = message
        self.args_ = args or []


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


@dataclass
class Phase:
    state: str  # PowerState while the phase runs
    end: float
    result: Literal["On", "Off"]  # PowerState after
    start_effect: str | None = None
    end_effect: str | None = None


@dataclass
class Session:
    id: str
    token: str
    user: str
    created: float
    last_used: float
    uses: int = 0  # requests made with its token


@dataclass
class Task:
    id: str
    component: str
    version: str
    image: str
    start: float
    end: float
    fail: bool
    state: str = "Running"
    percent: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    done_at: float | None = None
    apply_time: str = "Immediate"  # OnReset: staged when the task ends, applied at the next boot
    via: str = "SimpleUpdate"  # or "MultipartHttpPushUri"


@dataclass
class LogEntry:
    id: int
    created: float
    severity: str
    message: str
    message_id: str
    service: str


@dataclass
class Counters:
    power_on: int = 0
    power_off: int = 0
    power_cycle: int = 0
    resets: int = 0
    boots: int = 0
    firmware_flashes: int = 0
    firmware_failures: int = 0
    firmware_staged: int = 0  # OnReset updates whose task ended: applied at the next boot
    firmware_pushes: int = 0  # updates uploaded to the MultipartHttpPushUri
    firmware_downgrades: int = 0  # applied updates to a lower version than the one before
    firmware_by_component: dict[str, int] = field(default_factory=dict)  # applied updates per component
    requests: int = 0
    sessions_created: int = 0
    auth_failures: int = 0
    faults_served: int = 0
    installs: int = 0


class SimBMC:
    """One BMC: server identity from a spec, mutable state, faults, counters."""

    def __init__(self, spec: LabServerSpec, config: LabConfig, *, index: int = 0) -> None:
        self.spec = spec
        self.config = config
        self.index = index
        self.flavour: Flavour = FLAVOURS[spec.flavour]
        self.sys_id = spec.system_id
        self.chassis_id = self.flavour.chassis_id
        self.manager_id = self.flavour.manager_id
        self.url = ""  # set by the lab once bound
        self.fingerprint = ""
        # (ssl context, fingerprint) served while the wrong_cert fault is on; made at the
        # first handshake after the fault is set, dropped when it is set anew or cleared
        self.wrong_cert: tuple[Any, str] | None = None
        self.firmware: dict[str, str] = dict(spec.firmware)
        self.board_firmware: dict[str, str] = {
            _board_fw_id(b.kind, b.slot, comp): ver for b in spec.boards for comp, ver in b.firmware.items()
        }
        self.firmware_staged: dict[str, str] = {}  # component -> version, applied at the next boot
        # Power: `power` is the settled state; phases run on top of it.
        self.power = config.initial_power
        self.phases: deque[Phase] = deque()
        self.timeline: list[list[float | None]] = []  # [on_ts, off_ts or None]
        if self.power == "On":
            self.timeline.append([time.time(), None])
        self.boot_target = "None"
        self.boot_enabled = "Disabled"
        self.boot_mode = "UEFI"
        self.boot_log: list[dict[str, Any]] = []
        self.host = HostState()
        self.on_host_down: Any = None  # called when a power-off takes the host down (the SSH side drops its logins)
        self.bios: dict[str, Any] = {**DEFAULT_BIOS, **spec.bios_attributes}
        self.bios_pending: dict[str, Any] = {}
        self.bios_applied_at: float | None = None
        self.media: dict[str, dict[str, Any]] = {
            s.id: {"Image": None, "Inserted": False, "WriteProtected": True} for s in self.flavour.vm_slots
        }
        self.sessions: dict[str, Session] = {}  # by token
        self._session_ids = itertools.count(1)
        self.tasks: dict[str, Task] = {}
        self._task_ids = itertools.count(1)
        self.logs: list[LogEntry] = []
        self._log_ids = itertools.count(1)
        self.counters = Counters()
        self.faults: dict[str, Any] = {}
        self.indicator_led = "Off"
        self.asset_tag = ""
        self.basic_ok = _basic_header(spec.username, spec.password)
        self.boot_time = time.time()
        self._rng = random.Random(index)
        # Bumped by every change to what the BMC's documents show (touch()): the HTTP layer keeps each
        # rendered GET answer with the version it was rendered at, and serves it again only at that version.
        # Sessions do not bump it (every sweep logs in and out): only the Sessions collection shows them,
        # and the HTTP layer never keeps its answers (SESSIONS_SHOWN_UNDER).
        self.version = 0
        # The earliest time a document being rendered read the wall clock for (wall_clock()): the
        # rendered answer holds until then. The HTTP layer sets it to inf before it renders.
        self.rendered_until = math.inf
        self.log("OK", "Lab BMC started", "OpenBMC.0.1.BMCBootReason")

    # --- what the documents show changes ---------------------------------------

    def touch(self) -> None:
        """The documents may show something new: answers rendered before are stale."""
        self.version += 1

    def stable_until(self, now: float) -> float:
        """Until when the lazily computed state stays as it is at ``now`` with no request or fault.

        A power phase ends (the power state, sensors and watts change), a running task moves its
        PercentComplete with every read, an OS install ends with a log entry.
        """
        until = math.inf
        if self.phases:
            until = self.phases[0].end
        if any(t.state == "Running" for t in self.tasks.values()):
            return now
        up_at = self.host.up_at
        if self.host.mode == "installing" and up_at is not None and up_at > now:
            until = min(until, up_at)
        return until

    def wall_clock(self, offset: float = 0.0) -> float:
        """``time.time() + offset`` for a document's DateTime, shown to the second: a document that
        shows it holds until that second ends (``rendered_until``)."""
        now = time.time()
        t = now + offset
        self.rendered_until = min(self.rendered_until, now + (math.floor(t) + 1 - t))
        return t

    # --- logs ----------------------------------------------------------------

    def log(self, severity: str, message: str, message_id: str, *, when: float | None = None) -> None:
        service = self.flavour.system_logs[0]
        self.touch()
        self.logs.append(LogEntry(next(self._log_ids), when or time.time(), severity, message, message_id, service))
        if len(self.logs) > 500:  # a real SEL is small and wraps
            del self.logs[:100]

    # --- authentication -----------------------------------------------------

    def check_credentials(self, user: str, password: str) -> bool:
        return secrets.compare_digest(user, self.spec.username) and secrets.compare_digest(password, self.spec.password)

    def session_for(self, token: str, now: float) -> Session | None:
        s = self.sessions.get(token)
        if s is None:
            return None
        if now - s.last_used > self.config.session_timeout_s:
            del self.sessions[token]
            return None
        s.last_used = now
        s.uses += 1
        return s

    def open_session(self, user: str, now: float) -> Session:
        self._expire_sessions(now)
        if len(self.sessions) >= self.session_limit():
            # The DMTF Base registry's SessionLimitExceeded fixes no HTTP status; OpenBMC's bmcweb
            # (redfish-core/src/error_messages.cpp, sessionLimitExceeded) answers 503 Service Unavailable.
            if "session_limit" in self.faults:
                self.counters.faults_served += 1
            raise LabActionError(
                503,
                "Base.1.18.SessionLimitExceeded",
                "The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.",
            )
        sid = f"{next(self._session_ids)}{secrets.token_hex(4)}"
        s = Session(sid, secrets.token_hex(16), user, now, now)
        self.sessions[s.token] = s
        self.counters.sessions_created += 1
        return s

    def session_limit(self) -> int:
        """Sessions allowed open at once: the lab's ``max_sessions``, lowered by the ``session_limit`` fault (True = 0)."""
        f = self.faults.get("session_limit")
        if f is None:
            return self.config.max_sessions
        return 0 if f is True else min(self.config.max_sessions, max(0, int(f)))

    def close_session(self, sid: str) -> bool:
        for tok, s in list(self.sessions.items()):
            if s.id == sid:
                del self.sessions[tok]
                return True
        return False

    def _expire_sessions(self, now: float) -> None:
        for tok, s in list(self.sessions.items()):
            if now - s.last_used > self.config.session_timeout_s:
                del self.sessions[tok]

    # --- time ----------------------------------------------------------------

    def settle(self, now: float | None = None) -> None:
        """Apply every power phase and task that has finished by ``now``."""
        now = time.time() if now is None else now
        while self.phases and self.phases[0].end <= now:
            self.touch()
            ph = self.phases.popleft()
            self.power = ph.result
            if ph.end_effect:
                self._effect(ph.end_effect, ph.end)
            if self.phases and self.phases[0].start_effect:
                self._effect(self.phases[0].start_effect, ph.end)
        for t in self.tasks.values():
            if t.state == "Running":
                self._settle_task(t, now)
        self._installed(self.host.settle(now))

    def power_state(self, now: float | None = None) -> str:
        self.settle(now)
        return self.phases[0].state if self.phases else self.power

    def host_info(self, now: float | None = None) -> dict[str, Any]:
        """The host's phase (off / installing / booting / up / no-os / firmware) and ids."""
        now = time.time() if now is None else now
        powered = self.power_state(now) == "On"
        return self.host.describe(now, powered)

    def _installed(self, at: float | None) -> None:
        if at is not None:
            self.counters.installs += 1
            self.log("OK", "Operating system installed", "Lab.1.0.OSInstalled", when=at)

    def _effect(self, what: str, at: float) -> None:
        if what == "power_on":
            if not self.timeline or self.timeline[-1][1] is not None:
                self.timeline.append([at, None])
        elif what == "power_off":
            if self.timeline and self.timeline[-1][1] is None:
                self.timeline[-1][1] = at
        elif what == "boot":
            self._boot(at)

    def _boot(self, at: float) -> None:
        self.touch()
        self.counters.boots += 1
        source = BOOT_DEFAULT
        if self.boot_enabled != "Disabled" and self.boot_target != "None":
            source = self.boot_target
        entry: dict[str, Any] = {"time": at, "source": source}
        if source in ("Cd", "Usb", "Floppy", "RemoteDrive"):
            images = [m["Image"] for m in self.media.values() if m["Inserted"]]
            entry["image"] = images[0] if images else None
        self.boot_log.append(entry)
        self.host.boot(at, source, entry.get("image"), install_s=self.config.install_s, os_boot_s=self.config.os_boot_s,
                       devices_missing=fault_count(self.faults.get("device_missing")))  # fmt: skip
        if self.boot_enabled == "Once":
            self.boot_enabled = "Disabled"
            self.boot_target = "None"
        for comp, version in self.firmware_staged.items():
            self._apply_firmware(comp, version, at, staged=True)
        self.firmware_staged = {}
        if self.bios_pending:
            self.bios.update(self.bios_pending)
            self.bios_pending = {}
            self.bios_applied_at = at
            self.log("OK", "BIOS settings applied at boot", "Bios.1.0.SettingsApplied", when=at)

    def _schedule(self, now: float, phases: list[Phase]) -> None:
        self.touch()
        if phases and phases[0].state == "PoweringOff":
            self._installed(self.host.down(now))  # the OS stops as the power goes
            if self.on_host_down is not None:
                self.on_host_down()
        self.phases.clear()
        self.phases.extend(phases)
        if phases and phases[0].start_effect:
            self._effect(phases[0].start_effect, now)

    # --- power ---------------------------------------------------------------

    def reset(self, reset_type: str, now: float | None = None) -> None:
        """ComputerSystem.Reset. Raises LabActionError on refusal."""
        now = time.time() if now is None else now
        if reset_type not in self.flavour.reset_types:
            raise LabActionError(
                400,
                "Base.1.18.ActionParameterNotSupported",
                f"The parameter {reset_type} for the action ComputerSystem.Reset is not supported on the target resource.",
                [reset_type, "ResetType"],
            )
        cur = self.power_state(now)
        t_on = self.config.power_transition_s
        on = Phase("PoweringOn", now + t_on, "On", "power_on", "boot")
        if reset_type == "On" or (reset_type == "PowerCycle" and cur == "Off"):
            if cur in ("On", "PoweringOn"):
                return  # already on: must not power-cycle it
            if cur == "PoweringOff":
                raise _busy(cur)
            self.counters.resets += 1
            self.counters.power_on += 1
            self._schedule(now, [on])
        elif reset_type == "ForceOff":
            if cur == "Off":
                return
            self.counters.resets += 1
            self.counters.power_off += 1
            self._schedule(now, [Phase("PoweringOff", now + t_on, "Off", None, "power_off")])
        elif reset_type == "GracefulShutdown":
            if cur == "Off":
                return
            if cur != "On":
                raise _busy(cur)
            self.counters.resets += 1
            self.counters.power_off += 1
            self._schedule(now, [Phase("PoweringOff", now + self.config.graceful_s, "Off", None, "power_off")])
        else:  # ForceRestart, GracefulRestart, PowerCycle of a running server
            if cur == "Off":
                raise LabActionError(
                    409,
                    "Base.1.18.OperationNotAllowed",
                    f"{reset_type} is not allowed while the system is powered off.",
                )
            if cur != "On":
                raise _busy(cur)
            self.counters.resets += 1
            self.counters.power_cycle += 1
            t_off = self.config.graceful_s if reset_type == "GracefulRestart" else t_on
            off = Phase("PoweringOff", now + t_off, "Off", None, "power_off")
            on = Phase("PoweringOn", now + t_off + t_on, "On", "power_on", "boot")
            self._schedule(now, [off, on])
        self.log("OK", f"Server power: {reset_type} requested", "Base.1.18.Success", when=now)

    # --- boot / BIOS / media ------------------------------------------------

    def set_boot(self, boot: dict[str, Any]) -> None:
        target = boot.get("BootSourceOverrideTarget")
        enabled = boot.get("BootSourceOverrideEnabled")
        mode = boot.get("BootSourceOverrideMode")
        if target is not None and target not in self.flavour.boot_targets:
            raise _bad_value(str(target), "BootSourceOverrideTarget")
        if enabled is not None and enabled not in ("Disabled", "Once", "Continuous"):
            raise _bad_value(str(enabled), "BootSourceOverrideEnabled")
        if mode is not None and mode not in ("UEFI", "Legacy"):
            raise _bad_value(str(mode), "BootSourceOverrideMode")
        unknown = set(boot) - {"BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode"}
        if unknown:
            raise _unknown_prop(sorted(unknown)[0])
        self.touch()
        if target is not None:
            self.boot_target = target
            if enabled is None and target != "None" and self.boot_enabled == "Disabled":
                self.boot_enabled = "Once"  # as most BMCs do when only a target is set
        if enabled is not None:
            self.boot_enabled = enabled
        if mode is not None:
            self.boot_mode = mode

    def set_bios_pending(self, attrs: dict[str, Any]) -> None:
        for k, v in attrs.items():
            if k not in self.bios:
                raise LabActionError(
                    400,
                    "Base.1.18.PropertyUnknown",
                    f"The property {k} is not in the list of valid properties for the resource.",
                    [k],
                )
            if type(v) is not type(self.bios[k]):
                raise _bad_value(str(v), k)
        self.touch()
        self.bios_pending.update(attrs)

    def insert_media(self, slot: str, image: str, inserted: bool = True, write_protected: bool = True) -> None:
        m = self.media[slot]
        if m["Inserted"]:
            raise LabActionError(
                409, "Base.1.18.ResourceInUse", f"Virtual media slot {slot} already has media inserted; eject it first."
            )
        if not image or not isinstance(image, str):
            raise _bad_value(str(image), "Image")
        self.touch()
        m.update(Image=image, Inserted=bool(inserted), WriteProtected=bool(write_protected))

    def eject_media(self, slot: str) -> None:
        self.touch()
        self.media[slot].update(Image=None, Inserted=False)

    # --- firmware ------------------------------------------------------------

    def inventory(self) -> dict[str, str]:
        """FirmwareInventory id -> version."""
        return {**self.firmware, **self.board_firmware}

    def simple_update(self, image: str, targets: list[str], now: float | None = None, *, apply_time: str = "Immediate") -> Task:
        """SimpleUpdate: the component and version from ``Targets`` and the image's file name."""
        return self._start_update(image, targets, now, apply_time=apply_time, via="SimpleUpdate")

    def push_update(self, filename: str, content: bytes, targets: list[str], now: float | None = None, *,
                    apply_time: str = "Immediate") -> Task:  # fmt: skip
        """A multipart push: the same rule as SimpleUpdate, on the uploaded file's name; a name that
        says nothing falls back to the content's first line (``<component>-<version>``)."""
        name = filename.rsplit("/", 1)[-1]
        try:
            _image_name(name, self.inventory())
        except LabActionError:
            first = content[:200].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
            name = first or name
        task = self._start_update(name, targets, now, apply_time=apply_time, via="MultipartHttpPushUri")
        self.counters.firmware_pushes += 1
        return task

    def _start_update(self, image: str, targets: list[str], now: float | None, *, apply_time: str, via: str) -> Task:
        if apply_time not in ("Immediate", "OnReset"):
            raise _bad_value(apply_time, "@Redfish.OperationApplyTime")
        now = time.time() if now is None else now
        inv = self.inventory()
        comp = None
        for t in targets:
            cand = t.rstrip("/").rsplit("/", 1)[-1]
            if cand in inv:
                comp = cand
                break
            raise _bad_value(t, "Targets")
        hint_comp, version = _image_name(image, inv)
        comp = comp or hint_comp
        if comp is None:
            raise _bad_value(image, "ImageURI")
        if any(t.state == "Running" for t in self.tasks.values()):
            raise LabActionError(503, "Base.1.18.ServiceTemporarilyUnavailable", "An update is already in progress.", ["30"])
        self.touch()
        fail = bool(self.faults.get("firmware_fail"))
        ff = self.faults.get("firmware_fail")
        if isinstance(ff, int) and not isinstance(ff, bool):
            self.faults["firmware_fail"] = ff - 1 if ff > 1 else None
            if self.faults["firmware_fail"] is None:
                del self.faults["firmware_fail"]
        dur = self.config.firmware_update_s
        tid = str(next(self._task_ids))
        task = Task(tid, comp, version, image, now, now + (dur * 0.6 if fail else dur), fail, apply_time=apply_time, via=via)
        self.tasks[tid] = task
        if len(self.tasks) > 50:
            for old in list(self.tasks)[:10]:
                if self.tasks[old].state != "Running":
                    del self.tasks[old]
        return task

    def _settle_task(self, t: Task, now: float) -> None:
        self.touch()  # its PercentComplete moves; stable_until() keeps no answer while a task runs
        dur = max(self.config.firmware_update_s, 1e-6)
        if now < t.end:
            t.percent = min(99, int(100 * (now - t.start) / dur))
            return
        t.done_at = t.end
        if t.fail:
            t.state = "Exception"
            t.percent = int(100 * (t.end - t.start) / dur)
            self.counters.firmware_failures += 1
            t.messages.append(_msg("Update.1.0.ApplyFailed", f"Installing {t.component} {t.version} failed.", "Critical"))
            self.log("Critical", f"Firmware update of {t.component} to {t.version} failed", "Update.1.0.ApplyFailed", when=t.end)
        elif t.apply_time == "OnReset":
            # Staged, as a BMC does with @Redfish.OperationApplyTime OnReset: the task ends, the
            # version changes at the next boot of the system.
            t.state = "Completed"
            t.percent = 100
            self.counters.firmware_staged += 1
            self.firmware_staged[t.component] = t.version
            t.messages.append(_msg("Update.1.0.AwaitingActivation",
                                   f"{t.component} {t.version} is installed and awaits a system reset to be activated.", "OK"))
            self.log("OK", f"Firmware {t.component} {t.version} staged; applied at the next reset", "Update.1.0.AwaitingActivation",
                     when=t.end)  # fmt: skip
        else:
            t.state = "Completed"
            t.percent = 100
            self._apply_firmware(t.component, t.version, t.end, staged=False)
            t.messages.append(_msg("Update.1.0.UpdateSuccessful", f"{t.component} updated to {t.version}.", "OK"))

    def _apply_firmware(self, comp: str, version: str, at: float, *, staged: bool) -> None:
        before = self.inventory().get(comp)
        self.counters.firmware_flashes += 1
        self.counters.firmware_by_component[comp] = self.counters.firmware_by_component.get(comp, 0) + 1
        if before is not None and _version_key(version) < _version_key(before):
            self.counters.firmware_downgrades += 1
        if comp in self.firmware:
            self.firmware[comp] = version
        else:
            self.board_firmware[comp] = version
        how = " at boot (staged)" if staged else ""
        self.log("OK", f"Firmware {comp} updated from {before} to {version}{how}", "Update.1.0.UpdateSuccessful", when=at)

    # --- faults --------------------------------------------------------------

    def set_fault(self, **faults: Any) -> dict[str, Any]:
        """Merge faults; a value of None or False clears that fault."""
        for k in faults:
            if k not in FAULTS:
                raise ValueError(f"unknown fault {k!r}; known: {', '.join(sorted(FAULTS))}")
        self.touch()
        for k, v in faults.items():
            if k == "wrong_cert":
                self.wrong_cert = None  # set anew: a fresh certificate; cleared: the pinned one again
            if v is None or v is False or (v == 0 and k not in _ZERO_IS_A_VALUE):
                self.faults.pop(k, None)
                continue
            new = k not in self.faults
            self.faults[k] = v
            if new and k == "memory_errors":
                self.log("Warning", "Correctable memory error threshold exceeded on DIMM A1", "Memory.1.0.CorrectableErrorThreshold")
            elif new and k == "psu_failed":
                self.log("Critical", f"Power supply {_idx(v) + 1} failed", "Power.1.0.PowerSupplyFailed")
            elif new and k == "fan_failed":
                self.log("Critical", f"Fan {_idx(v) + 1} failed", "Thermal.1.0.FanFailed")
            elif new and k == "hot_sensor":
                self.log("Critical", "Temperature above the critical threshold", "Thermal.1.0.TemperatureAboveUpperCriticalThreshold")
        return dict(self.faults)

    def clear_faults(self) -> None:
        self.touch()
        self.faults.clear()
        self.wrong_cert = None

    def pcie_fault_for(self, slot: int, first_board_slot: int | None) -> dict[str, Any] | None:
        f = self.faults.get("pcie_degraded")
        if f is None:
            return None
        if f is True:
            f = {"slot": first_board_slot}
        elif isinstance(f, int):
            f = {"slot": f}
        if f.get("slot") != slot:
            return None
        return {"lanes": int(f.get("lanes", 8)), "gen": f.get("gen")}

    def board_without_serial(self) -> int | None:
        """The slot of the board the ``board_no_serial`` fault hides the serial of (None: no fault)."""
        f = self.faults.get("board_no_serial")
        if f is None or not self.spec.boards:
            return None
        if f is True:
            return max(b.slot for b in self.spec.boards)
        return int(f)

    def sensors_absent(self) -> bool:
        """True while the temperatures read Absent: the server is not on, and the flavour or a fault says so."""
        if not (self.flavour.absent_when_off or self.faults.get("sensors_absent")):
            return False
        return self.power_state() != "On"

    # --- health ---------------------------------------------------------------

    def chassis_health(self) -> str:
        if any(k in self.faults for k in ("psu_failed", "fan_failed", "hot_sensor")):
            return "Critical"
        return "OK"

    def system_health(self) -> str:
        ch = self.chassis_health()
        if ch != "OK":
            return ch
        if "memory_errors" in self.faults:
            return "Warning"
        return "OK"

    # --- what tests read ------------------------------------------------------

    def counters_dict(self) -> dict[str, Any]:
        self.settle()
        c = self.counters
        return {
            "name": self.spec.name,
            "power_state": self.power_state(),
            "power_on": c.power_on,
            "power_off": c.power_off,
            "power_cycle": c.power_cycle,
            "resets": c.resets,
            "boots": c.boots,
            "firmware_flashes": c.firmware_flashes,
            "firmware_failures": c.firmware_failures,
            "firmware_staged": c.firmware_staged,
            "firmware_pushes": c.firmware_pushes,
            "firmware_downgrades": c.firmware_downgrades,
            "firmware_by_component": dict(c.firmware_by_component),
            "firmware_pending": dict(self.firmware_staged),
            "requests": c.requests,
            "sessions_created": c.sessions_created,
            "sessions_open": len(self.sessions),
            "sessions": [{"id": s.id, "uses": s.uses} for s in self.sessions.values()],
            "auth_failures": c.auth_failures,
            "faults_served": c.faults_served,
            "installs": c.installs,
            "host": self.host_info(),
            "power_timeline": [{"on": a, "off": b} for a, b in self.timeline],
            "boot_log": list(self.boot_log),
            "firmware": self.inventory(),
            "bios_pending": dict(self.bios_pending),
            "faults": dict(self.faults),
        }


def _image_name(image: str, inv: dict[str, str]) -> tuple[str | None, str]:
    """(component, version) an image's file name says: ``<component>-<version>.<ext>`` or ``_``.

    The component is matched against the FirmwareInventory ids (None when it
    names none: ``Targets`` must then say which). Raises LabActionError when
    no version can be read from the name.
    """
    stem = image.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    for ext in (".bin", ".img", ".fwpkg", ".tar", ".gz", ".hpb", ".fw", ".zip", ".exe", ".BIN"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
    sep = max(stem.rfind("-"), stem.rfind("_"))
    if sep <= 0 or not stem[sep + 1 :]:
        raise _bad_value(image, "ImageURI")
    hint, version = stem[:sep], stem[sep + 1 :]
    comp = next((cid for cid in inv if cid.lower() == hint.lower()), None)
    return comp, version


def _version_key(v: str) -> tuple[tuple[int, str], ...]:
    """An order of versions good enough for the lab's downgrade counter: numeric parts as numbers."""
    import re

    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.\-_]", v))


def _board_fw_id(kind: str, slot: int, comp: str) -> str:
    return f"{kind}_slot{slot}_{comp}"


def _basic_header(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _idx(v: Any) -> int:
    return 0 if v is True else int(v)


def _msg(message_id: str, message: str, severity: str, args: list[str] | None = None) -> dict[str, Any]:
    return {
        "@odata.type": "#Message.v1_1_1.Message",
        "MessageId": message_id,
        "Message": message,
        "MessageArgs": args or [],
        "MessageSeverity": severity,
        "Severity": severity,
        "Resolution": "None.",
    }


def _busy(cur: str) -> LabActionError:
    return LabActionError(
        409,
        "Base.1.18.OperationNotAllowed",
        f"The system is {cur}; retry when the transition completes.",
    )


def _bad_value(value: str, prop: str) -> LabActionError:
    return LabActionError(
        400,
        "Base.1.18.PropertyValueNotInList",
        f"The value {value} for the property {prop} is not in the list of acceptable values.",
        [value, prop],
    )


def _unknown_prop(prop: str) -> LabActionError:
    return LabActionError(
        400, "Base.1.18.PropertyUnknown", f"The property {prop} is not in the list of valid properties for the resource.", [prop]
    )
