"""What provisioning reads before it starts (the inventory, per server) and how it reaches an installed OS."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from sqlalchemy import select

from fleetctl import hostio
from fleetctl.interfaces.host import HostTarget
from fleetctl.workflows.provision.model import BMC_NIC_NAMES, PROVISIONING_DEFAULTS, ServerCtx

#: The most a host may print in answer to the readiness probe (`true`, which prints nothing).
PROBE_MAX_BYTES = 64 << 10


def load_contexts(conn: Any, names: list[str]) -> dict[str, ServerCtx]:
    """Everything the steps need per server, in a few queries."""
    from fleetctl.inventory.ansible import _hosts
    from fleetctl.inventory.queries import site_provisioning
    from fleetctl.store import tables as T
    from fleetctl.targets import resolve
    from fleetctl.workflows.network import port_plan

    refs = {r.name: r for r in resolve(conn, names)}
    q = (
        select(T.server.c.id, T.server.c.name, T.server.c.state, T.rack.c.name.label("rack"), T.site.c.name.label("site"),
               T.hardware_model.c.name.label("model"), T.hardware_model.c.id.label("model_id"), T.hardware_model.c.board_kind,
               T.hardware_model.c.board_count, T.hardware_model.c.power_peak_w, T.bios_profile.c.attributes)
        .join(T.rack, T.rack.c.id == T.server.c.rack_id)
        .join(T.site, T.site.c.id == T.rack.c.site_id)
        .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
        .outerjoin(T.bios_profile, T.bios_profile.c.name == T.hardware_model.c.bios_profile)
        .where(T.server.c.name.in_(names))
    )
    rows = {r.name: r for r in conn.execute(q)}
    baseline: dict[int, dict[str, str]] = {}
    for r in conn.execute(select(T.firmware_baseline)):
        baseline.setdefault(r.model_id, {})[r.component] = r.version
    plan = port_plan(conn, servers=set(names))
    ports: dict[str, list[Any]] = {}
    for wants in plan.values():
        for w in wants:
            server, _, nic = w.who.partition("/")
            if nic.lower() not in BMC_NIC_NAMES:
                ports.setdefault(server, []).append(w)
    provs: dict[str, dict[str, Any]] = {}
    hosts = _hosts(conn, servers_only=set(names))
    out = {}
    for name in names:
        r = rows[name]
        if r.site not in provs:
            provs[r.site] = {**PROVISIONING_DEFAULTS, **(site_provisioning(conn, r.site) or {})}
        h = hosts.get(name, {"vars": {}, "groups": []})
        out[name] = ServerCtx(
            id=r.id, name=name, state=r.state, site=r.site, rack=f"{r.site}/{r.rack}", model=r.model,
            board_kind=r.board_kind, board_count=r.board_count or 0, peak_w=r.power_peak_w or 0,
            baseline=baseline.get(r.model_id, {}), bios=dict(r.attributes or {}), ports=ports.get(name, []),
            prov=provs[r.site], groups=list(h["groups"]), hostvars=dict(h["vars"]), bmc_ref=refs[name],
        )  # fmt: skip
    return out


def host_endpoint(ctx: ServerCtx) -> HostTarget:
    """How to reach a server's installed OS: its :class:`HostTarget` (``fleetctl.targets.host_target``)."""
    from fleetctl.targets import host_target

    return host_target(ctx.name, ctx.hostvars, ctx.prov)


def ansible_hostvars(ctx: ServerCtx, target: HostTarget) -> dict[str, Any]:
    """The server's Ansible variables with how to reach it: Ansible's SSH checks the host key as fleetctl does."""
    check = "yes" if target.strict else "accept-new"
    common = f"-o StrictHostKeyChecking={check}" + (f" -o UserKnownHostsFile={target.known_hosts}" if target.known_hosts else "")
    out = {**ctx.hostvars, "ansible_host": target.address, "ansible_port": target.port, "ansible_user": target.user,
           "ansible_ssh_common_args": common, "ansible_ssh_pipelining": True}  # fmt: skip
    if target.key_file:
        out["ansible_ssh_private_key_file"] = target.key_file
    return out


async def ssh_ready(target: HostTarget, timeout: float = 10.0) -> str | None:
    """None when the host lets us log in and run a command; else why not.

    A cheap probe first (TCP and the SSH banner, no cryptography), so that
    polling an installing host costs next to nothing; the login only once a
    banner answers (through the one host runner, ``fleetctl.hostio``).
    """
    where = f"{target.address}:{target.port}"
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(target.address, target.port), timeout)
    except (TimeoutError, OSError) as e:
        return f"{where}: {e.__class__.__name__}"
    try:
        banner = await asyncio.wait_for(reader.readline(), timeout)  # at most the stream's limit (64 KiB)
    except (TimeoutError, OSError, ValueError):  # ValueError: a "line" longer than the limit, so no banner
        banner = b""
    finally:
        writer.close()
    if not banner.startswith(b"SSH-"):
        return f"{where}: no SSH banner"
    import asyncssh

    try:
        async with hostio.connect(replace(target, name=where), timeout=timeout) as host:
            # `true` prints nothing: what a host prints anyway is read within a small bound
            done = await host.run("true", timeout=timeout, max_bytes=PROBE_MAX_BYTES)
            if done.exit_status != 0:
                return f"`true` exited {done.exit_status}"
    except (hostio.HostOutputError, hostio.HostUnreachable) as e:
        return str(e)
    except (TimeoutError, OSError, asyncssh.Error) as e:
        return f"ssh {target.where}: {e}"
    return None
