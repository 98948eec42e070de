"""The switch lab: SSH CLIs and SNMP agents for many lab switches in one process.

Each switch listens for SSH on its own loopback address (port 22 when it can
be bound, else an ephemeral port) and, through one snmpsim process, for SNMP
on the same address (port 161, or an ephemeral one). A control application
on 127.0.0.1 exposes state and fault injection under ``/lab/v1/switches``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.util
import ipaddress
import logging
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from fleetctl.errors import FleetError, InputError
from fleetctl_lab.sshserve import close_all, serve_ssh
from fleetctl_lab.switch.snmp import (
    SnmpAgents,
    community_of,
    render_snmprec,
    udp_endpoint,
)
from fleetctl_lab.switch.spec import NETMIKO_DEVICE_TYPE, LabSwitchSpec, SwitchLabConfig
from fleetctl_lab.switch.state import PORT_FAULTS, SWITCH_FAULTS, SimSwitch
from fleetctl_lab.threads import LoopProxy, serve_in_thread

log = logging.getLogger("fleetctl_lab.switch")
HOST_KEY_FILE = "switch_host_key"


class SwitchLab:
    """Every lab switch in one process.

    Usage::

        lab = SwitchLab(specs, SwitchLabConfig(state_dir=...))
        await lab.start()
        lab.status()["switches"]["leaf-1"]   # {ssh, snmp, community, platform, device_type}
        lab.switch_fault("leaf-1", "Ethernet4", "flap")
        await lab.stop()

    Methods must be called on the lab's event loop (``run_switch_lab_in_thread``
    gives thread-safe proxies).
    """

    def __init__(self, specs: Iterable[LabSwitchSpec], config: SwitchLabConfig | None = None) -> None:
        self.config = config or SwitchLabConfig()
        self.switches: dict[str, SimSwitch] = {}
        for i, spec in enumerate(specs):
            if spec.name in self.switches:
                raise InputError(f"duplicate lab switch name {spec.name!r}")
            self.switches[spec.name] = SimSwitch(spec, index=i, utilisation=self.config.utilisation)
        self.ssh: dict[str, tuple[str, int]] = {}
        self.snmp: dict[str, tuple[str, int]] = {}
        self._servers: list[Any] = []
        self._agents: SnmpAgents | None = None
        self._control: web.AppRunner | None = None
        self.control_url = ""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.state_dir: Path | None = None
        self.started_at: float | None = None
        self.start_seconds: float | None = None
        self._sessions: set[Any] = set()

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Bind every switch's SSH, start snmpsim and the control port. Raises FleetError."""
        logging.getLogger("asyncssh").setLevel(logging.WARNING)
        t0 = time.perf_counter()
        cfg = self.config
        if cfg.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fleetctl-swlab-")
            self.state_dir = Path(self._tmp.name)
        else:
            self.state_dir = Path(cfg.state_dir)
            self.state_dir.mkdir(parents=True, exist_ok=True)
        key = await asyncio.get_running_loop().run_in_executor(None, self._host_key)
        base = ipaddress.IPv4Address(cfg.base_address)
        try:
            for i, (name, sw) in enumerate(self.switches.items()):
                host = sw.spec.address or str(base + i)
                srv = await serve_ssh(
                    lambda sw=sw: _ssh_server(sw), host, cfg.ssh_port, what=f"switch {name}", log=log, server_host_keys=[key],
                    process_factory=lambda proc, sw=sw: self._session(sw, proc),
                    reuse_address=True, encoding="utf-8", line_editor=True, keepalive_interval=0,
                )  # fmt: skip
                self._servers.append(srv)
                self.ssh[name] = (host, srv.sockets[0].getsockname()[1])
            if cfg.snmp and self.switches and importlib.util.find_spec("snmpsim") is None:
                log.warning("switch lab: snmpsim is not installed; the switches answer SSH only")
            elif cfg.snmp and self.switches:
                self._agents = SnmpAgents(self.state_dir / "snmp")
                self._agents.data_dir.mkdir(parents=True, exist_ok=True)
                for old in self._agents.data_dir.glob("*.snmprec"):
                    old.unlink()
                for name, sw in self.switches.items():
                    self.snmp[name] = udp_endpoint(self.ssh[name][0], cfg.snmp_port)
                    self._render(sw)
                    sw.on_change = self._render
                for name in self.switches:
                    self._agents.probe_packet(self.community(name))
                await self._agents.start([(self.snmp[n], self.community(n)) for n in self.switches],
                                         timeout=cfg.snmp_start_timeout_s, processes=cfg.snmp_processes)  # fmt: skip
        except OSError as e:
            await self.stop()
            raise FleetError(f"lab: cannot bind a switch socket ({e}); is another lab running on these addresses?") from e
        except BaseException:
            await self.stop()
            raise
        capp = web.Application()
        capp.add_routes(self._control_routes())
        self._control = web.AppRunner(capp, handle_signals=False, access_log=None)
        await self._control.setup()
        site = web.TCPSite(self._control, cfg.control_host, cfg.control_port)
        await site.start()
        cport = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.control_url = f"http://{cfg.control_host}:{cport}"
        self.started_at = time.time()
        self.start_seconds = time.perf_counter() - t0
        log.info("switch lab: %d switches up in %.2fs, control %s", len(self.switches), self.start_seconds, self.control_url)

    async def stop(self) -> None:
        for conn in list(self._sessions):
            with contextlib.suppress(Exception):
                conn.abort()
        await close_all(self._servers)
        if self._agents is not None:
            await self._agents.stop()
            self._agents = None
        if self._control is not None:
            await self._control.cleanup()
            self._control = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _host_key(self) -> Any:
        """One ed25519 host key for the lab's switches, kept in the state folder."""
        import asyncssh

        assert self.state_dir is not None
        path = self.state_dir / HOST_KEY_FILE
        if path.exists():
            return asyncssh.read_private_key(str(path))
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(str(path))
        path.chmod(0o600)
        return key

    def _render(self, sw: SimSwitch) -> None:
        if self._agents is not None:
            self._agents.write(self.community(sw.name), render_snmprec(sw))

    async def _snmp_settled(self, name: str) -> None:
        """Ask snmpsim for the switch's data once: it indexes a changed file at its next request, so this
        one, not the next client's (a sweep's, with its own timeout), waits for the index."""
        if self._agents is not None and self._agents.running:
            with contextlib.suppress(FleetError, OSError):  # snmpsim died: the next client's request will say so
                await self._agents.answered(self.snmp[name], self.community(name), 30.0)

    # --- the API ------------------------------------------------------------------------

    def names(self) -> list[str]:
        return list(self.switches)

    def switch(self, name: str) -> SimSwitch:
        try:
            return self.switches[name]
        except KeyError:
            raise InputError(f"no lab switch named {name!r}") from None

    def community(self, name: str) -> str:
        return community_of(self.config.community, name)

    def switch_fault(self, name: str, port: str | None, fault: str, value: Any = True) -> dict[str, Any]:
        """Set a fault on a port (or, with ``port=None``, on the switch); None/False clears it.

        Port faults: flap, crc, miscabled, down; switch faults: reboot,
        ssh_drop_after, ssh_latency_ms, overheat (see ``PORT_FAULTS``/``SWITCH_FAULTS``).
        Returns the faults in force.
        """
        try:
            return self.switch(name).set_fault(port, fault, value)
        except ValueError as e:
            raise InputError(str(e)) from e

    set_fault = switch_fault

    def clear_faults(self, name: str, port: str | None = None) -> None:
        try:
            self.switch(name).clear_faults(port)
        except KeyError as e:
            raise InputError(f"switch {name} has no port {port!r}") from e

    def describe(self, name: str) -> dict[str, Any]:
        sw = self.switch(name)
        return {**self.status()["switches"][name], **sw.describe()}

    def counters(self, name: str) -> dict[str, int]:
        return dict(self.switch(name).counters)

    def status(self) -> dict[str, Any]:
        """What lab.json holds for the switches: no passwords."""
        out = {}
        for name, sw in self.switches.items():
            ssh = self.ssh.get(name)
            snmp = self.snmp.get(name)
            out[name] = {
                "ssh": f"{ssh[0]}:{ssh[1]}" if ssh else None,
                "snmp": f"{snmp[0]}:{snmp[1]}" if snmp else None,
                "community": self.community(name) if snmp else None,
                "platform": sw.platform,
                "device_type": NETMIKO_DEVICE_TYPE[sw.platform],
                "username": sw.spec.username,
            }
        return {"switch_control_url": self.control_url, "switches": out}

    # --- SSH sessions ---------------------------------------------------------------------

    async def _session(self, sw: SimSwitch, process: Any) -> None:
        import asyncssh

        from fleetctl_lab.switch.eos import EOSSession
        from fleetctl_lab.switch.sonic import SonicSession

        user = process.get_extra_info("username") or sw.spec.username
        sess: Any = EOSSession(sw, user) if sw.platform == "eos" else SonicSession(sw, user)
        conn = process.channel.get_connection()
        self._sessions.add(conn)
        sw.counters["logins"] += 1
        sw.counters["sessions_open"] += 1
        try:
            if process.command:  # ssh host 'show version'
                for line in process.command.split(";"):
                    process.stdout.write(sess.execute(line))
                process.exit(0)
                return
            process.stdout.write(sess.banner() + sess.prompt())
            while not sess.closed:
                try:
                    line = await process.stdin.readline()
                except (asyncssh.TerminalSizeChanged, asyncssh.BreakReceived, asyncssh.SignalReceived):
                    continue
                if not line:
                    break
                lat = sw.faults.get("ssh_latency_ms")
                if lat:
                    await asyncio.sleep(float(lat) / 1000)
                out = sess.execute(line.rstrip("\r\n"))
                drop = sw.faults.get("ssh_drop_after")
                if drop and line.strip():
                    drop = int(drop) - 1
                    if drop <= 0:
                        # The command took effect; the answer never arrives.
                        sw.faults.pop("ssh_drop_after", None)
                        sw.counters["drops"] += 1
                        conn.abort()
                        return
                    sw.faults["ssh_drop_after"] = drop
                if sess.closed:
                    break
                process.stdout.write(out + sess.prompt())
            process.exit(0)
        except (asyncssh.Error, OSError, ConnectionError):
            pass
        finally:
            sw.counters["sessions_open"] -= 1
            self._sessions.discard(conn)

    # --- the control endpoint ---------------------------------------------------------------

    def _control_routes(self) -> list[web.RouteDef]:
        def sw_or_404(request: web.Request) -> SimSwitch:
            name = request.match_info["name"]
            if name not in self.switches:
                raise web.HTTPNotFound(text=f'{{"error": "no lab switch named {name}"}}', content_type="application/json")
            return self.switches[name]

        async def root(_: web.Request) -> web.Response:
            return web.json_response({"count": len(self.switches), "control_url": self.control_url,
                                      "port_faults": PORT_FAULTS, "switch_faults": SWITCH_FAULTS,
                                      "started_at": self.started_at, "start_seconds": self.start_seconds})  # fmt: skip

        async def listing(_: web.Request) -> web.Response:
            return web.json_response(self.status()["switches"])

        async def one(request: web.Request) -> web.Response:
            return web.json_response(self.describe(sw_or_404(request).name))

        async def faults_get(request: web.Request) -> web.Response:
            return web.json_response(sw_or_404(request).faults_dict())

        async def faults_patch(request: web.Request) -> web.Response:
            # {"port": "Ethernet4" | null, "faults": {"flap": true, "crc": null}}
            # or {"port": ..., "fault": "flap", "value": 2}
            sw = sw_or_404(request)
            try:
                body = await request.json()
                faults = body.get("faults") or {body["fault"]: body.get("value", True)}
                out: dict[str, Any] = {}
                for f, v in faults.items():
                    out = self.switch_fault(sw.name, body.get("port"), f, v)
            except (ValueError, TypeError, KeyError, AttributeError, InputError) as e:
                return web.json_response({"error": str(e)}, status=400)
            await self._snmp_settled(sw.name)  # the fault is in force when the caller hears back
            return web.json_response(out)

        async def faults_delete(request: web.Request) -> web.Response:
            sw = sw_or_404(request)
            port = request.query.get("port")
            try:
                self.clear_faults(sw.name, port)
            except InputError as e:
                return web.json_response({"error": str(e)}, status=400)
            await self._snmp_settled(sw.name)
            return web.Response(status=204)

        return [
            web.get("/lab/v1", root),
            web.get("/lab/v1/switches", listing),
            web.get("/lab/v1/switches/{name}", one),
            web.get("/lab/v1/switches/{name}/faults", faults_get),
            web.patch("/lab/v1/switches/{name}/faults", faults_patch),
            web.post("/lab/v1/switches/{name}/faults", faults_patch),
            web.delete("/lab/v1/switches/{name}/faults", faults_delete),
        ]


_SERVER_CLASS: list[type] = []


def _ssh_server(sw: SimSwitch) -> Any:
    """asyncssh server callbacks: password login with the switch's lab credential."""
    if not _SERVER_CLASS:
        import asyncssh

        class Server(asyncssh.SSHServer):
            def __init__(self, sw: SimSwitch) -> None:
                self.sw = sw

            def begin_auth(self, username: str) -> bool:
                return True

            def password_auth_supported(self) -> bool:
                return True

            def validate_password(self, username: str, password: str) -> bool:
                spec = self.sw.spec
                ok = username == spec.username and hmac.compare_digest(password.encode(), spec.password.encode())
                if not ok:
                    self.sw.counters["auth_failures"] += 1
                return ok

        _SERVER_CLASS.append(Server)
    return _SERVER_CLASS[0](sw)


# --- running in a thread (tests) -----------------------------------------------------------------


class ThreadedSwitchLab(LoopProxy):
    """A switch lab on its own thread and event loop; thread-safe proxies."""

    def switch_fault(self, name: str, port: str | None, fault: str, value: Any = True) -> dict[str, Any]:
        return self.call(self.lab.switch_fault, name, port, fault, value)

    set_fault = switch_fault

    def clear_faults(self, name: str, port: str | None = None) -> None:
        self.call(self.lab.clear_faults, name, port)

    def describe(self, name: str) -> dict[str, Any]:
        return self.call(self.lab.describe, name)

    def counters(self, name: str) -> dict[str, int]:
        return self.call(self.lab.counters, name)

    def ssh_of(self, name: str) -> tuple[str, int]:
        return self.lab.ssh[name]

    def snmp_of(self, name: str) -> tuple[str, int]:
        return self.lab.snmp[name]

    def community(self, name: str) -> str:
        return self.lab.community(name)


@contextlib.contextmanager
def run_switch_lab_in_thread(specs: Iterable[LabSwitchSpec], config: SwitchLabConfig | None = None, *,
                             timeout: float = 120.0) -> Iterator[ThreadedSwitchLab]:  # fmt: skip
    """Start a switch lab in a background thread; stop it when the block ends."""
    lab = SwitchLab(specs, config)
    with serve_in_thread(lab, name="fleetctl-switch-lab", timeout=timeout) as loop:
        yield ThreadedSwitchLab(lab, loop)
