"""The capabilities of a Redfish BMC, one class per fleetctl interface.

Each class holds a reference to the :class:`RedfishDriver` (its client, the
system/manager/chassis URIs and the vendor quirks) and turns an operator's
intent into Redfish requests; parsing lives in :mod:`.parse`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleetctl.errors import BMCError, DriverError, Timeout
from fleetctl.interfaces.bmc import (
    BiosInterface,
    BootDevice,
    BootInterface,
    BootOverride,
    FirmwareComponent,
    FirmwareInterface,
    HealthInterface,
    HealthReport,
    InventoryInterface,
    LogEntry,
    ManagerFacts,
    ManagerInterface,
    MediaInterface,
    MediaStatus,
    PCIeDevice,
    PowerInterface,
    PowerState,
    ProgressCallback,
    SystemFacts,
    TaskResult,
    UpdateServiceInfo,
)

from . import parse
from .client import TASK_DONE_STATES, AnswerOutOfBounds, RedfishClient, RedfishError, Response, _Retryable, odata_id

if TYPE_CHECKING:
    from .driver import RedfishDriver


class _Capability:
    def __init__(self, driver: RedfishDriver) -> None:
        self.d = driver

    @property
    def c(self) -> RedfishClient:  # the client
        return self.d.client

    def _fail(self, message: str) -> DriverError:
        return DriverError(f"{self.d.target.name}: {message}")


# ---------------------------------------------------------------------- power


class RedfishPower(_Capability, PowerInterface):
    async def state(self) -> PowerState:
        system = await self.c.get(self.d.system_uri)
        return parse.power_state(system.get("PowerState"))

    async def _reset_info(self) -> tuple[str, list[str] | None]:
        system = await self.c.get(self.d.system_uri)
        action = (system.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        target = action.get("target") or f"{self.d.system_uri}/Actions/ComputerSystem.Reset"
        allowed = action.get("ResetType@Redfish.AllowableValues")
        if allowed is None and action.get("@Redfish.ActionInfo"):
            info = await self.c.get_optional(action["@Redfish.ActionInfo"])
            for p in (info or {}).get("Parameters") or []:
                if p.get("Name") == "ResetType":
                    allowed = p.get("AllowableValues")
        return target, allowed

    async def _reset(self, reset_type: str) -> None:
        target, allowed = await self._reset_info()
        if allowed is not None and reset_type not in allowed:
            raise self._fail(f"reset {reset_type!r} not offered by this BMC (offers {', '.join(allowed)})")
        resp = await self.c.post(target, {"ResetType": reset_type})
        if resp.status == 202:
            await self.c.follow_task(resp, timeout=300)

    async def on(self) -> bool:
        # "on" never cycles a server that is already on (a MAAS/Ironic complaint)
        if await self.state() in (PowerState.ON, PowerState.POWERING_ON):
            return False
        await self._reset("On")
        return True

    async def off(self, *, force: bool = False) -> bool:
        if await self.state() == PowerState.OFF:
            return False
        await self._reset("ForceOff" if force else "GracefulShutdown")
        return True

    async def restart(self, *, force: bool = True) -> None:
        await self._reset("ForceRestart" if force else "GracefulRestart")

    async def cycle(self) -> None:
        target, allowed = await self._reset_info()
        if allowed is None or "PowerCycle" in allowed:
            try:
                resp = await self.c.post(target, {"ResetType": "PowerCycle"})
                if resp.status == 202:
                    await self.c.follow_task(resp, timeout=300)
                return
            except RedfishError as e:
                if e.status not in (400, 405, 501):
                    raise
        # no PowerCycle here (sushy-tools answers 501, iLO 5 does not list it): off, then on
        if await self.state() != PowerState.OFF:
            await self._reset("ForceOff")
            await self.wait_for(PowerState.OFF, timeout=120)
        await self._reset("On")

    async def wait_for(self, wanted: PowerState, *, timeout: float = 120.0, interval: float = 2.0) -> PowerState:
        deadline = time.monotonic() + timeout
        while True:
            state = await self.state()
            if state == wanted:
                return state
            if time.monotonic() > deadline:
                raise Timeout(
                    f"{self.d.target.name}: power still {state.value} after {timeout:g} s, wanted {wanted.value}"
                )
            await asyncio.sleep(interval)


# ----------------------------------------------------------------------- boot


class RedfishBoot(_Capability, BootInterface):
    async def get(self) -> BootOverride:
        boot = (await self.c.get(self.d.system_uri)).get("Boot") or {}
        enabled = boot.get("BootSourceOverrideEnabled")
        return BootOverride(
            device=parse.boot_device(boot.get("BootSourceOverrideTarget")),
            persistent=None if enabled is None else enabled == "Continuous",
            mode=parse._s(boot.get("BootSourceOverrideMode")),
            uefi_target=parse._s(boot.get("UefiTargetBootSourceOverride")),
        )

    async def set(
        self,
        device: BootDevice,
        *,
        persistent: bool = False,
        uefi_target: str | None = None,
        mode: str | None = None,
    ) -> None:
        device = BootDevice(device)
        if device == BootDevice.UNKNOWN:
            raise self._fail("cannot boot from an unknown device")
        if uefi_target:
            device = BootDevice.UEFI_TARGET
        system = await self.c.get(self.d.system_uri)
        boot_now = system.get("Boot") or {}
        value = parse.BOOT_TARGET_TO_REDFISH[device]
        allowed = boot_now.get("BootSourceOverrideTarget@Redfish.AllowableValues")
        if allowed is not None and value not in allowed:
            raise self._fail(f"boot device {value!r} not offered by this BMC (offers {', '.join(allowed)})")
        boot: dict[str, Any] = {
            "BootSourceOverrideTarget": value,
            "BootSourceOverrideEnabled": "Continuous" if persistent else "Once",
        }
        if mode:
            boot["BootSourceOverrideMode"] = mode
        if device == BootDevice.UEFI_TARGET:
            if not uefi_target:
                raise self._fail("a UEFI boot override needs the target's device path")
            boot["UefiTargetBootSourceOverride"] = uefi_target
        await self.d.patch_resource(self.d.system_uri, {"Boot": boot}, current=system)


# ---------------------------------------------------------------------- media


def _media_status(uri: str, vm: dict) -> MediaStatus:
    image = parse._s(vm.get("Image"))
    inserted = vm.get("Inserted")
    if inserted is None:
        inserted = image is not None
    return MediaStatus(
        slot=str(vm.get("Id") or uri.rsplit("/", 1)[-1]),
        inserted=bool(inserted),
        image=image,
        media_types=[str(t) for t in vm.get("MediaTypes") or []],
    )


class RedfishMedia(_Capability, MediaInterface):
    async def _slot_docs(self) -> list[tuple[str, dict]]:
        """Virtual media slots, from the first location (per the quirks) that has any."""
        await self.d.ensure_links()
        system = await self.c.get(self.d.system_uri)
        q = await self.d.quirks()
        for where in q.media_locations:
            if where == "systems":
                colls = [odata_id(system.get("VirtualMedia"))]
            else:
                managers = (system.get("Links") or {}).get("ManagedBy") or []
                colls = []
                for m in managers:
                    mdoc = await self.c.get_optional(odata_id(m))
                    colls.append(odata_id((mdoc or {}).get("VirtualMedia")))
                if not managers and self.d.manager_uri:
                    mdoc = await self.c.get_optional(self.d.manager_uri)
                    colls.append(odata_id((mdoc or {}).get("VirtualMedia")))
            found: list[tuple[str, dict]] = []
            for coll in colls:
                if not coll:
                    continue
                for vm in await self.c.members(coll):
                    found.append((odata_id(vm) or coll, vm))
            if found:
                return found
        raise self._fail("virtual media is not supported by this BMC (no VirtualMedia under Systems or Managers)")

    async def slots(self) -> list[MediaStatus]:
        return [_media_status(uri, vm) for uri, vm in await self._slot_docs()]

    async def _pick(self, media_type: str, slot: str | None) -> tuple[str, dict]:
        docs = await self._slot_docs()
        if slot:
            for uri, vm in docs:
                if slot.lower() in (
                    str(vm.get("Id", "")).lower(),
                    str(vm.get("Name", "")).lower(),
                    uri.rsplit("/", 1)[-1].lower(),
                ):
                    return uri, vm
            raise self._fail(f"no virtual media slot {slot!r} (slots: {', '.join(str(v.get('Id')) for _, v in docs)})")
        q = await self.d.quirks()
        wanted = media_type.lower()
        kinds = {
            "cd": ("cd", "dvd"),
            "dvd": ("cd", "dvd"),
            "usb": ("usbstick", "floppy"),
            "floppy": ("floppy", "usbstick"),
        }.get(wanted, (wanted,))
        if wanted in ("cd", "dvd"):
            for name in q.media_cd_slots:
                for uri, vm in docs:
                    if str(vm.get("Id", "")).lower() == name.lower() or uri.rsplit("/", 1)[-1].lower() == name.lower():
                        return uri, vm
        for uri, vm in docs:
            if any(str(t).lower() in kinds for t in vm.get("MediaTypes") or []):
                return uri, vm
        for uri, vm in docs:
            if any(k in str(vm.get("Id", "")).lower() for k in kinds):
                return uri, vm
        raise self._fail(
            f"no virtual media slot for {media_type} (slots: "
            + ", ".join(f"{v.get('Id')} {v.get('MediaTypes') or ''}" for _, v in docs)
            + ")"
        )

    async def insert(self, image_url: str, *, media_type: str = "CD", slot: str | None = None) -> MediaStatus:
        uri, vm = await self._pick(media_type, slot)
        now = _media_status(uri, vm)
        if now.inserted and now.image == image_url:
            return now
        if now.inserted:
            await self._eject(uri, vm)
        q = await self.d.quirks()
        action = (vm.get("Actions") or {}).get("#VirtualMedia.InsertMedia")
        if action and action.get("target"):
            body: dict[str, Any] = {"Image": image_url}
            if "Inserted" in q.media_insert_extra:
                body["Inserted"] = True
            if "WriteProtected" in q.media_insert_extra:
                body["WriteProtected"] = True
            resp = await self.c.post(action["target"], body)
            if resp.status == 202:
                await self.c.follow_task(resp, timeout=600)
        elif q.media_patch_fallback:
            await self.d.patch_resource(uri, {"Image": image_url, "Inserted": True}, current=vm)
        else:
            raise self._fail(f"virtual media slot {now.slot} has no InsertMedia action")
        return _media_status(uri, await self.c.get(uri))

    async def _eject(self, uri: str, vm: dict) -> None:
        q = await self.d.quirks()
        action = (vm.get("Actions") or {}).get("#VirtualMedia.EjectMedia")
        if action and action.get("target"):
            resp = await self.c.post(action["target"], {})
            if resp.status == 202:
                await self.c.follow_task(resp, timeout=300)
        elif q.media_patch_fallback:
            await self.d.patch_resource(uri, {"Image": None, "Inserted": False}, current=vm)
        else:
            raise self._fail(f"virtual media slot {vm.get('Id')} has no EjectMedia action")

    async def eject(self, *, media_type: str = "CD", slot: str | None = None) -> MediaStatus:
        uri, vm = await self._pick(media_type, slot)
        if not _media_status(uri, vm).inserted:
            return _media_status(uri, vm)
        await self._eject(uri, vm)
        return _media_status(uri, await self.c.get(uri))


# ----------------------------------------------------------------------- bios


class RedfishBios(_Capability, BiosInterface):
    async def _bios(self) -> tuple[str, dict]:
        system = await self.c.get(self.d.system_uri)
        uri = odata_id(system.get("Bios"))
        if not uri:
            raise self._fail("BIOS settings are not supported by this BMC (no Bios resource)")
        try:
            return uri, await self.c.get(uri)
        except RedfishError as e:
            if e.status in (404, 501):
                raise self._fail(f"BIOS settings are not supported by this BMC ({e})") from e
            raise

    async def _settings_uri(self, uri: str, bios: dict) -> str:
        obj = (bios.get("@Redfish.Settings") or {}).get("SettingsObject")
        if odata_id(obj):
            return odata_id(obj)  # type: ignore[return-value]
        q = await self.d.quirks()
        return uri.rstrip("/") + q.bios_settings_suffix

    async def attributes(self) -> dict[str, Any]:
        _, bios = await self._bios()
        attrs = bios.get("Attributes")
        if not isinstance(attrs, dict):
            raise self._fail("the BMC's Bios resource has no Attributes (host powered off or BIOS not yet reported)")
        return dict(attrs)

    async def pending(self) -> dict[str, Any]:
        uri, bios = await self._bios()
        current = bios.get("Attributes") or {}
        staged = await self.c.get_optional(await self._settings_uri(uri, bios))
        attrs = (staged or {}).get("Attributes") or {}
        return {k: v for k, v in attrs.items() if current.get(k) != v}

    async def stage(self, settings: Mapping[str, Any]) -> None:
        uri, bios = await self._bios()
        current = bios.get("Attributes") or {}
        unknown = sorted(k for k in settings if current and k not in current)
        if unknown:
            raise self._fail(f"unknown BIOS attribute(s): {', '.join(unknown)}")
        body: dict[str, Any] = {"Attributes": dict(settings)}
        q = await self.d.quirks()
        if q.bios_apply_time:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
        await self.d.patch_resource(await self._settings_uri(uri, bios), body)

    async def verify(self, expected: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        have = await self.attributes()
        return {k: (v, have.get(k)) for k, v in expected.items() if have.get(k) != v}


# ------------------------------------------------------------------- firmware


class RedfishFirmware(_Capability, FirmwareInterface):
    async def _update_service(self) -> dict:
        root = await self.c.service_root()
        uri = odata_id(root.get("UpdateService"))
        doc = await self.c.get_optional(uri)
        if not doc:
            raise self._fail("firmware inventory and update are not supported by this BMC (no UpdateService)")
        return doc

    async def inventory(self) -> list[FirmwareComponent]:
        # Where the BMC fixes the inventory's URI (Quirks.firmware_inventory_suffix), it is read without the
        # UpdateService document (1 request fewer); not there (404), the UpdateService names it, as before.
        suffix = (await self.d.quirks_at_no_cost()).firmware_inventory_suffix
        us_link = odata_id((await self.c.service_root()).get("UpdateService")) if suffix else None
        if us_link and suffix:
            guess = us_link.rstrip("/") + suffix
            missed: list[str] = []
            found = await self.c.members(guess, errors=missed)
            if not (missed and missed[0] == f"{guess}: missing"):
                return self._components(guess, found, missed)
        us = await self._update_service()
        coll = odata_id(us.get("FirmwareInventory"))
        if not coll:
            raise self._fail("this BMC has no FirmwareInventory")
        errors: list[str] = []
        items = await self.c.members(coll, errors=errors)
        return self._components(coll, items, errors)

    def _components(self, coll: str, items: list[dict], errors: list[str]) -> list[FirmwareComponent]:
        if errors and errors[0] == f"{coll}: missing":
            raise self._fail(f"firmware inventory is not supported by this BMC ({coll} not found)")
        if not items and errors:
            raise self._fail(f"firmware inventory unreadable: {errors[0]}")
        # The member's URI is what Redfish ``Targets`` names (to flash exactly that component).
        return [parse.parse_firmware(i).model_copy(update={"uri": odata_id(i)}) for i in items]

    async def update_service_info(self) -> UpdateServiceInfo:
        us = await self._update_service()
        action = (us.get("Actions") or {}).get("#UpdateService.SimpleUpdate") or {}
        support = action.get("@Redfish.OperationApplyTimeSupport") or {}
        push_opts = ((us.get("HttpPushUriOptions") or {}).get("HttpPushUriApplyTime") or {})
        push_times = push_opts.get("ApplyTime@Redfish.AllowableValues") or ([push_opts["ApplyTime"]] if push_opts.get("ApplyTime") else [])
        return UpdateServiceInfo(
            simple_update=bool(action.get("target")),
            transfer_protocols=[str(p) for p in action.get("TransferProtocol@Redfish.AllowableValues") or []],
            simple_update_apply_times=[str(v) for v in support.get("SupportedValues") or []],
            multipart_push_uri=us.get("MultipartHttpPushUri") or None,
            push_apply_times=[str(v) for v in push_times],
        )

    async def start_simple_update(
        self, image_uri: str, *, targets: Sequence[str] | None = None, apply_time: str | None = None
    ) -> str | None:
        us = await self._update_service()
        action = (us.get("Actions") or {}).get("#UpdateService.SimpleUpdate")
        if not action or not action.get("target"):
            raise self._fail("SimpleUpdate is not supported by this BMC")
        body: dict[str, Any] = {"ImageURI": image_uri}
        if targets:
            body["Targets"] = list(targets)
        if apply_time:
            body["@Redfish.OperationApplyTime"] = apply_time
        q = await self.d.quirks()
        if (q.update_needs_transfer_protocol or "TransferProtocol@Redfish.AllowableValues" in action) and "://" in image_uri:
            body["TransferProtocol"] = image_uri.split("://", 1)[0].upper()
        # An action: the client does not repeat it after a timeout (it may have reached the BMC).
        resp = await self.c.post(action["target"], body)
        return _task_monitor(resp)

    async def start_push(
        self, image: bytes, filename: str, *, targets: Sequence[str] | None = None, apply_time: str | None = None
    ) -> str | None:
        us = await self._update_service()
        uri = us.get("MultipartHttpPushUri")
        if not uri:
            raise self._fail("this BMC offers no MultipartHttpPushUri (multipart firmware push)")
        params: dict[str, Any] = {"Targets": list(targets or [])}
        if apply_time:
            params["@Redfish.OperationApplyTime"] = apply_time
        boundary = "fleetctl-" + secrets.token_hex(12)
        safe_name = filename.replace('"', "").replace("\r", "").replace("\n", "")
        body = b"".join([
            f'--{boundary}\r\nContent-Disposition: form-data; name="UpdateParameters"\r\n'
            "Content-Type: application/json\r\n\r\n".encode(), json.dumps(params).encode(), b"\r\n",
            f'--{boundary}\r\nContent-Disposition: form-data; name="UpdateFile"; filename="{safe_name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode(), image, b"\r\n",
            f"--{boundary}--\r\n".encode(),
        ])  # fmt: skip
        resp = await self._post_raw(uri, body, f"multipart/form-data; boundary={boundary}")
        return _task_monitor(resp)

    async def _post_raw(self, uri: str, data: bytes, content_type: str) -> Response:
        """POST a non-JSON body, once.

        NOTE: the client's ``_request`` only sends JSON; this reuses its
        transport, auth and error decoding for the one multipart request
        fleetctl makes. Never retried on a dropped connection or a timeout:
        the image may have reached the BMC, and a flash is not repeated
        without first reading what the BMC did. A 401 (the session expired)
        was refused before anything happened, so it logs in again once.
        """
        c = self.c
        path = c._path(uri)
        for attempt in (1, 2):
            hdrs = {"Accept": "application/json", "OData-Version": "4.0", "Content-Type": content_type}
            if c._token:
                hdrs["X-Auth-Token"] = c._token
            elif c._basic:
                hdrs["Authorization"] = c._basic
            try:
                status, rhdrs, raw = await c._send("POST", c.base + path, hdrs, data)
            except _Retryable as e:
                raise e.error from e.__cause__
            body = None
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
            if status == 401 and attempt == 1 and c.auth_mode == "session":
                await c._relogin(hdrs.get("X-Auth-Token"))
                continue
            if status >= 400:
                raise c._http_error("POST", path, status, body, authenticated=True)
            return Response(status, rhdrs, body)
        raise self._fail(f"POST {path}: not authorised after logging in again")

    async def follow_task(self, task_uri: str | None, *, progress: ProgressCallback | None = None,
                          timeout: float = 3600.0) -> TaskResult:  # fmt: skip
        if not task_uri:
            return TaskResult(state="Completed", messages=[])
        return await self.c.follow_task(Response(202, {"Location": task_uri}, None), progress=progress, timeout=timeout)

    async def simple_update(
        self,
        image_uri: str,
        *,
        targets: Sequence[str] | None = None,
        transfer_protocol: str | None = None,
        progress: ProgressCallback | None = None,
        timeout: float = 3600.0,
    ) -> TaskResult:
        us = await self._update_service()
        action = (us.get("Actions") or {}).get("#UpdateService.SimpleUpdate")
        if not action or not action.get("target"):
            raise self._fail("SimpleUpdate is not supported by this BMC")
        body: dict[str, Any] = {"ImageURI": image_uri}
        if targets:
            body["Targets"] = list(targets)
        q = await self.d.quirks()
        proto = transfer_protocol
        if proto is None and (q.update_needs_transfer_protocol or "TransferProtocol@Redfish.AllowableValues" in action):
            proto = image_uri.split("://", 1)[0].upper() if "://" in image_uri else None
        if proto:
            body["TransferProtocol"] = proto
        resp = await self.c.post(action["target"], body)
        return await self.c.follow_task(resp, progress=progress, timeout=timeout)

    async def running_updates(self) -> list[TaskResult]:
        root = await self.c.service_root()
        ts = await self.c.get_optional(odata_id(root.get("TaskService")))
        coll = odata_id((ts or {}).get("Tasks"))
        if not coll:
            return []  # no TaskService: nothing can be seen running
        errors: list[str] = []
        tasks = await self.c.members(coll, errors=errors)
        out = []
        for t in tasks:
            state = t.get("TaskState")
            if state and state not in TASK_DONE_STATES:
                msgs = [m.get("Message") or m.get("MessageId", "") for m in t.get("Messages") or [] if isinstance(m, dict)]
                out.append(TaskResult(state=state, percent=t.get("PercentComplete"), messages=msgs, task_uri=t.get("@odata.id")))
        return out


def _task_monitor(resp: Response) -> str | None:
    """Where to follow an accepted update: the Location header, else the task in the body; None: done at once."""
    loc = resp.headers.get("Location") if resp.headers is not None else None
    body = resp.body if isinstance(resp.body, dict) else {}
    if loc:
        return str(loc)
    if body.get("TaskState") and body.get("@odata.id"):
        return str(body["@odata.id"])
    if resp.status == 202:
        raise BMCError("the BMC accepted the update (202) but named no task monitor")
    return None


# ------------------------------------------------------------------ inventory


class RedfishInventory(_Capability, InventoryInterface):
    async def facts(self) -> SystemFacts:
        system = await self.c.get(self.d.system_uri)
        q = await self.d.quirks()
        warnings: list[str] = []
        # A sweep whose checks judge no NIC (none of the built-in ones does) or no board reads neither.
        nics_task = (
            self.c.members(odata_id(system.get("EthernetInterfaces")) or "", errors=warnings)
            if odata_id(system.get("EthernetInterfaces")) and self.d.wanted("facts.nics")
            else None
        )
        devices_wanted = self.d.wanted("facts.devices")
        if not devices_wanted:
            pcie_task: Any = None
        elif q.oem_devices == "hpe":
            pcie_task = self._hpe_devices(system, warnings)
        else:
            pcie_task = self._standard_devices(system, warnings, decimal=q.pci_ids_decimal, function0=q.pcie_function0_id)
        # GPUs and accelerators listed as Processors (DMTF's examples, OpenBMC, NVIDIA HGX):
        # one collection read, expanded where the client asks for it
        procs_uri = odata_id(system.get("Processors")) if devices_wanted else None
        procs_task = self.c.members(procs_uri, errors=warnings) if procs_uri else None
        eths, devices, procs = (got or [] for got in await _together(nics_task, pcie_task, procs_task))
        ps = system.get("ProcessorSummary") or {}
        mem = system.get("MemorySummary") or {}
        rules = parse.load_board_rules(self.d.accelerators_file)
        proc_boards = [b for b in (parse.parse_processor_board(p, rules) for p in procs) if b]
        boards, board_warnings = parse.merge_processor_boards(parse.classify_boards(devices, rules), proc_boards)
        warnings.extend(board_warnings)
        return SystemFacts(
            serial=parse._s(system.get("SerialNumber")),
            model=parse._s(system.get("Model")),
            manufacturer=parse._s(system.get("Manufacturer")),
            uuid=parse._s(system.get("UUID")),
            bios_version=parse._s(system.get("BiosVersion")),
            power_state=parse.power_state(system.get("PowerState")),
            cpu_count=ps.get("Count") if isinstance(ps.get("Count"), int) else None,
            cpu_model=parse._s(ps.get("Model")),
            cpu_cores=ps.get("CoreCount") if isinstance(ps.get("CoreCount"), int) else None,
            memory_gib=parse._num(mem.get("TotalSystemMemoryGiB")),
            nics=[parse.parse_nic(e) for e in eths],
            pcie_devices=devices,
            boards=boards,
            vendor=q.vendor,
            warnings=warnings,
        )

    async def _standard_devices(self, system: dict, warnings: list[str], *, decimal: bool,
                                function0: str | None = None) -> list[PCIeDevice]:  # fmt: skip
        refs: list[Any] = []
        levels = await expand_levels(self.c)
        pd = system.get("PCIeDevices")
        if isinstance(pd, list):  # older schema: links on the system
            refs.extend(pd)
        elif odata_id(pd):  # newer: a collection (OpenBMC: Systems/system/PCIeDevices)
            coll = await self.c.collection(odata_id(pd))
            if coll is None:
                warnings.append(f"{odata_id(pd)}: missing")
            refs.extend((coll or {}).get("Members") or [])
        for ch in (system.get("Links") or {}).get("Chassis") or []:
            chassis = await self.c.get_optional(odata_id(ch))
            link = odata_id((chassis or {}).get("PCIeDevices"))
            if link:
                coll = await _deep_collection(self.c, link, levels)
                if coll is None:
                    warnings.append(f"{link}: missing")
                refs.extend((coll or {}).get("Members") or [])
        seen: set[str] = set()
        unique = []
        for r in refs:
            key = odata_id(r) or id(r)
            if key not in seen:
                seen.add(key)  # type: ignore[arg-type]
                unique.append(r)
        docs = await _expand(self.c, unique, warnings)
        # A device whose functions came inline (a deep read) is parsed here, without a request or a task; the
        # others are read by as many readers as the BMC takes requests at once, in the devices' order.
        out: list[PCIeDevice | None] = [None] * len(docs)
        slow: list[int] = []
        limit = self.c.bounds.max_collection_members
        for i, dev in enumerate(docs):
            fn_refs = _function_refs(dev, limit)
            if fn_refs is not None and not any(_is_link(r) for r in fn_refs):
                out[i] = parse.parse_pcie_device(dev, await self.c.expand(fn_refs, errors=warnings), decimal_ids=decimal)
            else:
                slow.append(i)
        if slow:
            read = await _each(self.c, [(docs[i], _function_refs(docs[i], limit)) for i in slow],
                               self._device, warnings, decimal, function0)  # fmt: skip
            for i, dev in zip(slow, read, strict=True):
                out[i] = dev
        return out  # type: ignore[return-value]  # every slot filled above

    async def _device(self, item: tuple[dict, list | None], warnings: list[str], decimal: bool,
                      function0: str | None) -> PCIeDevice:  # fmt: skip
        """A PCIe device with its functions, read where they are not in ``item`` (device, :func:`_function_refs`)."""
        dev, fn_refs = item
        if fn_refs is None:
            fn_uri = odata_id(dev.get("PCIeFunctions")) or ""
            # Only function 0 is judged (parse_pcie_device): where the BMC names it (Quirks.pcie_function0_id),
            # one request instead of the collection and its members (bmcweb: 2 -> 1 per device).
            zero = await _function_zero(self.c, fn_uri, function0) if function0 else None
            if zero is not None:
                return parse.parse_pcie_device(dev, [zero], decimal_ids=decimal)
            fcoll = await self.c.collection(fn_uri)
            fn_refs = (fcoll or {}).get("Members") or []
        functions = await _expand(self.c, fn_refs or [], warnings)
        return parse.parse_pcie_device(dev, functions, decimal_ids=decimal)

    async def _hpe_devices(self, system: dict, warnings: list[str]) -> list[PCIeDevice]:
        # NOTE: HPE iLO 5 (DL325/XL675d Gen10 Plus, 2.46/2.55): see quirks.oem_devices
        links = ((system.get("Oem") or {}).get("Hpe") or {}).get("Links") or {}
        pci_uri = odata_id(links.get("PCIDevices"))
        if not pci_uri:  # an iLO (or a twin) without the OEM inventory: the standard way
            return await self._standard_devices(system, warnings, decimal=True)
        chassis_devs: list[dict] = []
        for ch in (system.get("Links") or {}).get("Chassis") or []:
            chassis = await self.c.get_optional(odata_id(ch))
            dlink = odata_id((((chassis or {}).get("Oem") or {}).get("Hpe") or {}).get("Links", {}).get("Devices"))
            if dlink:
                chassis_devs.extend(await self.c.members(dlink, errors=warnings))
        pcis = await self.c.members(pci_uri, errors=warnings)
        by_pci: dict[str, dict] = {}
        for dev in chassis_devs:
            for inst in dev.get("DeviceInstances") or []:
                if inst_id := odata_id(inst):
                    by_pci[inst_id.rstrip("/").lower()] = dev
        out = []
        for p in pcis:
            oem_dev = by_pci.get((odata_id(p) or "").rstrip("/").lower())
            out.append(parse.parse_hpe_pci_device(p, oem_dev))
        if not out:  # no OEM data: try the standard way (a newer iLO)
            return await self._standard_devices(system, warnings, decimal=True)
        return out


#: The ``$levels`` a sweep's collection reads ask for where the service root offers ``$expand=.`` with levels
#: (``ExpandQuery.Levels``, capped at its ``MaxLevels``): 3 carries a chassis's PCIe devices with their
#: functions, and a LogServices collection with each log's entries, in one request each (the lab's AMI dialect:
#: 26 -> 16 requests per BMC). 2 saves nothing there (the functions and entries collections come inline with
#: their members still links, and are read again); measured in docs/sweep.md, "Where the time goes".
SWEEP_EXPAND_LEVELS = 3


async def expand_levels(c: RedfishClient) -> int:
    """How deep a collection read goes in one request on this BMC: 1 (today's ``$expand`` or none) unless the
    client expands collections and the service root offers ``.`` with ``Levels`` and a ``MaxLevels`` above 1."""
    if not c.expand_collections or not await c.expand_query():
        return 1
    eq = ((await c.service_root()).get("ProtocolFeaturesSupported") or {}).get("ExpandQuery")
    if not isinstance(eq, dict) or not eq.get("Levels") or not eq.get("NoLinks"):
        return 1
    most = eq.get("MaxLevels")
    if isinstance(most, bool) or not isinstance(most, int):
        return 1
    return max(1, min(SWEEP_EXPAND_LEVELS, most))


async def _deep_collection(c: RedfishClient, uri: str | None, levels: int) -> dict | None:
    """A collection read ``levels`` deep in one request (``$expand=.($levels=N)``), else as :meth:`RedfishClient.collection`.

    The deep answer is used only when it is one whole page within the members bound
    (:func:`parse.whole_collection`); one that fails, is too large (``max_body_bytes``) or pages is read
    again the usual way, which applies the bounds and follows the pages as before.
    """
    if levels < 2 or not uri or "?" in uri:
        return await c.collection(uri)
    try:
        body = await c.get_optional(f"{uri}?$expand=.($levels={levels})")
    except (RedfishError, AnswerOutOfBounds):
        body = None
    if parse.whole_collection(body, c.bounds.max_collection_members) is None:
        return await c.collection(uri)
    return body


async def _deep_members(c: RedfishClient, uri: str, levels: int, *, errors: list[str] | None = None) -> list[dict]:
    """:meth:`RedfishClient.members`, from one deep read where ``levels`` > 1 and the answer is whole."""
    if levels >= 2:
        coll = await _deep_collection(c, uri, levels)
        if parse.whole_collection(coll, c.bounds.max_collection_members) is not None:
            return await _expand(c, coll["Members"], errors)  # type: ignore[index]
    return await c.members(uri, errors=errors)


async def _expand(c: RedfishClient, refs: Any, errors: list[str] | None) -> list[dict]:
    """:meth:`RedfishClient.expand`, its links read by a few readers (:func:`_each`), not a task per link.

    Each link goes through ``expand`` alone (no task there: one link is awaited in place), so what is skipped
    and noted in ``errors`` is as before; past the members bound, or with fewer than two links, ``expand``
    itself (which raises at the bound).
    """
    refs = list(refs)
    if len(refs) > c.bounds.max_collection_members or sum(1 for r in refs if _is_link(r)) < 2:
        return await c.expand(refs, errors=errors)
    got = await _each(c, refs, _expand_one, c, errors)
    return [doc for one in got for doc in one]


async def _expand_one(ref: Any, c: RedfishClient, errors: list[str] | None) -> list[dict]:
    return await c.expand((ref,), errors=errors)


def _function_refs(dev: dict, limit: int) -> list | None:
    """A PCIe device's function references: its ``Links.PCIeFunctions``, else the members a deep read brought
    inline; None when its ``PCIeFunctions`` collection is still to be read."""
    fn_refs = (dev.get("Links") or {}).get("PCIeFunctions")
    if fn_refs is None:
        inline = parse.whole_collection(dev.get("PCIeFunctions"), limit, expanded=True)
        if inline is not None:
            return inline["Members"]  # links left among them are read by expand
        if odata_id(dev.get("PCIeFunctions")):
            return None
    return fn_refs or []


def _is_link(ref: Any) -> bool:
    """Whether :meth:`RedfishClient.expand` reads ``ref`` (a bare ``@odata.id`` link) rather than taking it as is."""
    return isinstance(ref, dict) and bool(ref.get("@odata.id")) and (len(ref) == 1 or (len(ref) == 2 and "@odata.type" in ref))


async def _function_zero(c: RedfishClient, functions_uri: str, member: str) -> dict | None:
    """Function 0 of a PCIe device, read at ``{functions_uri}/{member}`` without its collection; None when that is
    not it (missing, an error, a ``FunctionId`` other than 0): the caller reads the collection as before.

    :func:`parse.parse_pcie_device` judges the function with the lowest ``FunctionId``; function 0 is that one
    wherever it exists (the PCIe specification requires it of every device), so the verdicts are the same.
    """
    try:
        doc = await c.get_optional(f"{functions_uri.rstrip('/')}/{member}")
    except RedfishError:
        return None  # a 5xx: the collection's walk meets it again and notes it, as before
    fid = doc.get("FunctionId") if isinstance(doc, dict) else None
    return doc if type(fid) is int and fid == 0 else None


async def _member_links(c: RedfishClient, uri: str, limit: int) -> list[str] | None:
    """The member URIs of a collection read in one answer, when they are all plain links and it has no next page;
    None otherwise (missing, expanded members, paged): the caller walks it as before (:meth:`RedfishClient.members`,
    which reads this same answer again only without ``read_once``)."""
    whole = parse.whole_collection(await c.collection(uri), limit)
    if whole is None:
        return None
    links = [odata_id(m) for m in whole["Members"]]
    if not all(isinstance(m, dict) and set(m) <= {"@odata.id", "@odata.type"} for m in whole["Members"]) or not all(links):
        return None
    return links  # type: ignore[return-value]


def _retrieve(task: asyncio.Future[Any]) -> None:
    """A done callback: the task's exception is retrieved (asyncio logs one nobody retrieved)."""
    if not task.cancelled():
        task.exception()


async def _together(*reads: Any) -> list[Any]:
    """What each of ``reads`` (coroutines; None: nothing to read, None) gives, read concurrently as
    ``asyncio.gather`` would, with a task for each but the first, which is awaited here: one task fewer per call.
    The first starts first, as under gather (its tasks start in order at the loop's next turn).

    As with gather: the first exception is raised and the other reads go on (their exceptions retrieved);
    cancelled, the reads still running are cancelled, and waited for: none outlives the BMC's read (the
    driver's logout and the fleet's connector closing after it would meet a read still running).
    """
    live = [i for i, c in enumerate(reads) if c is not None]
    out: list[Any] = [None] * len(reads)
    if not live:
        return out
    tasks = [asyncio.ensure_future(reads[i]) for i in live[1:]]
    try:
        out[live[0]] = await reads[live[0]]
    except asyncio.CancelledError:
        await _cancelled(tasks)
        raise
    except BaseException:
        for t in tasks:
            t.add_done_callback(_retrieve)
        raise
    if len(tasks) == 1:
        out[live[1]] = await tasks[0]
    elif tasks:
        for i, got in zip(live[1:], await asyncio.gather(*tasks), strict=True):
            out[i] = got
    return out


async def _cancelled(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended (what they raise is retrieved, not raised)."""
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks)
        for t in tasks:
            _retrieve(t)


async def _drain(queue: Any, out: list[Any], read: Any, args: tuple[Any, ...]) -> None:
    """One reader: ``out[i] = await read(item, *args)`` for the next ``(i, item)`` of the shared ``queue`` until none
    is left (a loop over a bounded collection's members, each awaiting a request)."""
    for i, item in queue:
        out[i] = await read(item, *args)


async def _each(c: RedfishClient, items: Sequence[Any], read: Any, *args: Any) -> list[Any]:
    """``[await read(item, *args) for item in items]``, as many at once as the BMC lets requests fly
    (``max_in_flight``, 2): a few readers, not a task per member (issue 24). Results in ``items``' order;
    the requests are started in that order too."""
    out: list[Any] = [None] * len(items)
    queue = iter(enumerate(items))
    n = min(len(items), max(1, c.target.max_in_flight))
    if n:
        await _together(*(_drain(queue, out, read, args) for _ in range(n)))
    return out


# --------------------------------------------------------------------- health


class RedfishHealth(_Capability, HealthInterface):
    async def report(self) -> HealthReport:
        await self.d.ensure_links()
        system = await self.c.get(self.d.system_uri)
        warnings: list[str] = []
        sh = system.get("Status") or {}
        report = HealthReport(
            system_health=parse._s(sh.get("Health")),
            system_health_rollup=parse._s(sh.get("HealthRollup")),
        )
        chassis_uri = self.d.chassis_uri
        chassis = await self.c.get_optional(chassis_uri) if chassis_uri else None
        if not chassis:
            warnings.append("no chassis")
            report.warnings = warnings
            return report
        report.chassis_health = parse._s((chassis.get("Status") or {}).get("Health"))
        sources = []
        # What the caller judges (a sweep's checks): a part not wanted is not read, and stays empty.
        want_fans, want_temps, want_psus = (self.d.wanted(k) for k in ("health.fans", "health.temperatures", "health.psus"))
        want_thermal = want_fans or want_temps
        if not (want_thermal or want_psus):
            report.warnings = warnings
            return report
        # The old Thermal and Power hold every fan, temperature and PSU in two answers; the new
        # subsystems take a request per member where the BMC cannot expand a collection (OpenBMC's
        # default: 28 requests on a lab MN-Server). There, read the old ones first.
        if odata_id(chassis.get("Thermal")) and odata_id(chassis.get("Power")) and not await self.c.offers_expand():
            thermal, power = await _together(
                self.c.get_optional(odata_id(chassis.get("Thermal"))) if want_thermal else None,
                self.c.get_optional(odata_id(chassis.get("Power"))) if want_psus else None)  # fmt: skip
            if thermal:
                report.fans, report.temperatures = parse.parse_old_thermal(thermal)
                if not want_fans:
                    report.fans = []
                if not want_temps:
                    report.temperatures = []
            if power:
                report.psus = parse.parse_old_power(power)
            if (report.fans or not want_fans) and (report.temperatures or not want_temps) and (report.psus or not want_psus):
                report.source = "Thermal+Power"
                report.warnings = warnings
                return report
            report.fans, report.temperatures, report.psus = [], [], []  # incomplete: the new schema decides, as below
        # new schema first (ThermalSubsystem/PowerSubsystem/Sensors), the old one where the new says nothing
        thermal_new = await self.c.get_optional(odata_id(chassis.get("ThermalSubsystem"))) if want_fans else None
        if thermal_new and (fans_uri := odata_id(thermal_new.get("Fans"))):
            report.fans = [parse.parse_new_fan(f) for f in await self.c.members(fans_uri, errors=warnings)]
        power_new = await self.c.get_optional(odata_id(chassis.get("PowerSubsystem"))) if want_psus else None
        if power_new and (psus_uri := odata_id(power_new.get("PowerSupplies"))):
            report.psus = [parse.parse_new_psu(p) for p in await self.c.members(psus_uri, errors=warnings)]
        if want_temps and (sensors_uri := odata_id(chassis.get("Sensors"))):
            sensors = await self.c.members(sensors_uri, errors=warnings)
            report.temperatures = [t for t in (parse.parse_sensor_temperature(s) for s in sensors) if t]
        if report.fans or report.psus or report.temperatures:
            sources.append("Subsystems")
        if want_thermal and ((want_fans and not report.fans) or (want_temps and not report.temperatures)):
            thermal = await self.c.get_optional(odata_id(chassis.get("Thermal")))
            if thermal:
                fans, temps = parse.parse_old_thermal(thermal)
                if want_fans and not report.fans and fans:
                    report.fans = fans
                if want_temps and not report.temperatures and temps:
                    report.temperatures = temps
                sources.append("Thermal")
        if want_psus and not report.psus:
            power = await self.c.get_optional(odata_id(chassis.get("Power")))
            if power:
                report.psus = parse.parse_old_power(power)
                sources.append("Power")
        report.source = "+".join(sources) or None
        report.warnings = warnings
        return report

    async def log_entries(self, since: str | None = None) -> tuple[list[LogEntry], str | None]:
        cursor_time = parse.parse_datetime(since) if since else None
        await self.d.ensure_links()
        system = await self.c.get(self.d.system_uri)
        levels = await expand_levels(self.c)
        limit = self.c.bounds.max_collection_members
        # Where the BMC fixes a service's entries at {service}{suffix} (Quirks.log_entries_suffix), they are read
        # without the LogService document: one request fewer per service (bmcweb: 3 on the lab's OpenBMC).
        suffix = (await self.d.quirks_at_no_cost()).log_entries_suffix if levels < 2 else None
        services: list[str] = []
        guessed: dict[str, str] = {}  # entries URI taken from the pattern: the service it is guessed from
        inline: dict[str, dict] = {}  # entries collections a deep read brought whole
        for owner in (system, await self.c.get_optional(self.d.manager_uri) if self.d.manager_uri else None):
            link = odata_id((owner or {}).get("LogServices"))
            if not link:
                continue
            links = await _member_links(self.c, link, limit) if suffix else None
            if links is not None and suffix:
                for svc_uri in links:
                    guessed[svc_uri.rstrip("/") + suffix] = svc_uri
                    services.append(svc_uri.rstrip("/") + suffix)
                continue
            for svc in await _deep_members(self.c, link, levels):
                entries_uri = odata_id(svc.get("Entries"))
                if entries_uri:
                    services.append(entries_uri)
                    whole = parse.whole_collection(svc["Entries"], limit, expanded=True)
                    if whole is not None:
                        inline[entries_uri] = whole
        if not services:
            # Not "no news": nothing can be said about the log (sushy-tools, a BMC with logs turned off).
            raise self._fail("the BMC offers no log service (Systems or Managers LogServices)")
        entries: list[LogEntry] = []
        # Entries a deep read brought whole are parsed here, without a request or a task; the other services
        # are read by as many readers as the BMC takes requests at once, in the services' order.
        read_all: list[tuple[list[LogEntry], bool]] = [([], False)] * len(services)
        slow: list[int] = []
        for i, uri in enumerate(services):
            whole = inline.get(uri)
            if whole is not None and not any(_is_link(m) for m in whole["Members"]):
                items = await self.c.expand(whole["Members"])
                read_all[i] = ([parse.parse_log_entry(e, uri.rsplit("/Entries", 1)[0]) for e in items], True)
            else:
                slow.append(i)
        if slow:
            for i, got in zip(slow, await _each(self.c, [services[i] for i in slow], self._log_read, inline, guessed), strict=True):
                read_all[i] = got
        if not any(found for _, found in read_all):
            raise self._fail("the BMC offers no log service (Systems or Managers LogServices)")
        for batch, _ in read_all:
            entries.extend(batch)
        if cursor_time is not None:
            entries = [e for e in entries if e.created is not None and e.created > cursor_time]
        entries.sort(key=lambda e: (e.created is None, e.created or 0, e.log, e.id))
        newest = max((e.created for e in entries if e.created), default=None)
        cursor = newest.isoformat() if newest else since
        return entries, cursor

    async def _log_read(self, uri: str, inline: dict[str, dict], guessed: dict[str, str]) -> tuple[list[LogEntry], bool]:
        """The entries at ``uri``, and whether a log service has them (False: a guess that missed)."""
        whole = inline.get(uri)
        if whole is not None:
            items = await self.c.expand(whole["Members"])
        elif uri in guessed:
            missing: list[str] = []
            items = await self.c.members(uri, errors=missing)
            if f"{uri}: missing" in missing:
                # Not where the pattern says: the service's own document tells, as the walk without the
                # pattern reads it (a service that fails or has no Entries is no log service there either).
                try:
                    svc = await self.c.get_optional(guessed[uri])
                except RedfishError:
                    svc = None
                entries_uri = odata_id((svc or {}).get("Entries"))
                if not entries_uri:
                    return [], False
                items = await self.c.members(entries_uri) if entries_uri != uri else []  # that one is missing
                uri = entries_uri
        else:
            items = await self.c.members(uri)
        return [parse.parse_log_entry(e, uri.rsplit("/Entries", 1)[0]) for e in items], True


# -------------------------------------------------------------------- manager


class RedfishManager(_Capability, ManagerInterface):
    async def facts(self) -> ManagerFacts:
        await self.d.ensure_links()
        if not self.d.manager_uri:
            raise self._fail("this BMC names no Manager")
        return parse.parse_manager(await self.c.get(self.d.manager_uri))
