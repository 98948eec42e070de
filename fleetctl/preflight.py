"""Preflight: every credential and setting a workflow will need, checked before it touches the first device.

A workflow that would find a missing secret only at its last step (the
Kubernetes join token at the Ansible step, after firmware, BIOS, VLANs and an
OS install on every server) has already changed a rack it cannot finish.
So each workflow gathers what it will need, a :class:`Preflight` resolves
every credential reference once and checks the settings, collects *all*
problems, and :meth:`Preflight.refuse` raises one :class:`PreflightError`
(exit 2, one line: the first problem and how many more). The secrets read
here are dropped at once; the workflow resolves them again when it uses
them (a ``cmd:`` source therefore runs once more).

What each workflow refuses on (docs/security.md):

- provision, firmware update, burn-in: every problem (a reference that is
  malformed or names an unknown source, a secret that is not there, a
  missing setting such as the SSH key file);
- sweep (read-only, whole fleet): only problems of the operator's own setup
  that every ``cmd:`` target would share (the secrets config unusable or
  missing). A server whose own reference or secret is wrong stays a finding
  of that server: one bad server never stops the sweep of the others.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fleetctl.config import bmc_limits
from fleetctl.errors import FleetError, InputError
from fleetctl.secrets import BadReference, load_sources, resolve, resolve_token, secrets_config_path
from fleetctl.targets import resolve_switches


@dataclass
class Problem:
    """One thing that would make the workflow fail; ``who`` lists every device or site it concerns."""

    what: str
    who: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        more = f" (and {len(self.who) - 1} more)" if len(self.who) > 1 else ""
        return f"{self.who[0]}{more}: {self.what}" if self.who else self.what


class PreflightError(InputError):
    """A workflow refused before touching anything; ``problems`` holds every problem found."""

    def __init__(self, workflow: str, problems: list[Problem]) -> None:
        self.problems = problems
        rest = len(problems) - 1
        more = f" (and {rest} more problem{'s' if rest > 1 else ''}; nothing was touched)" if rest else " (nothing was touched)"
        super().__init__(f"{workflow} refused: {problems[0]}{more}")


class Preflight:
    """Collects a workflow's problems; resolves each distinct reference once."""

    def __init__(self, workflow: str) -> None:
        self.workflow = workflow
        self._problems: dict[str, Problem] = {}
        self._resolved: dict[tuple[str, str], str | None] = {}

    @property
    def problems(self) -> list[Problem]:
        return list(self._problems.values())

    def add(self, who: str, what: str) -> None:
        """Record a problem; the same problem on several devices is one problem naming them all."""
        self._problems.setdefault(what, Problem(what)).who.append(who)

    def _resolve(self, kind: str, ref: str) -> str | None:
        key = (kind, ref)
        if key not in self._resolved:
            try:
                (resolve_token if kind == "token" else resolve)(ref)
                self._resolved[key] = None
            except FleetError as e:
                self._resolved[key] = str(e)
        return self._resolved[key]

    def credential(self, who: str, ref: str | None, *, what: str = "credential") -> None:
        """A username and password (BMC, switch SSH, SNMP) must be readable through ``ref``."""
        if not ref:
            self.add(who, f"no {what} reference in the inventory")
            return
        err = self._resolve("credential", ref)
        if err:
            self.add(who, f"{what} {err.removeprefix('credential ')}" if err.startswith("credential ") else f"{what}: {err}")

    def token(self, who: str, ref: str, *, what: str) -> None:
        """A single secret (a join token) must be readable through ``ref``."""
        err = self._resolve("token", ref)
        if err:
            self.add(who, f"{what}: {err}")

    def bmc(self, servers: Iterable[Any], *, optional: bool = False) -> None:
        """Each server's BMC URL and credential (``targets.ServerRef``); ``optional``: a server without a BMC URL is fine.

        Raises:
            InputError: a ``FLEETCTL_BMC_*`` setting is bad (every BMC would fail on it: refused once, here).
        """
        bmc_limits()
        for s in servers:
            if not s.bmc_url:
                if not optional:
                    self.add(f"server {s.name}", "no BMC URL in the inventory")
                continue
            self.credential(f"server {s.name}", s.credential)

    def switches(self, switches: Iterable[Any]) -> None:
        """Each switch's SSH credential (``targets.SwitchRef``)."""
        for s in switches:
            self.credential(f"switch {s.name}", s.credential, what="SSH credential")

    def snmp(self, switches: Iterable[Any]) -> None:
        """Each switch's SNMP settings and credential (``targets.SwitchRef``)."""
        for s in switches:
            if not s.snmp_credential:
                self.add(f"switch {s.name}", "no snmp settings in the inventory")
            else:
                self.credential(f"switch {s.name}", s.snmp_credential, what="SNMP credential")

    def ssh_key(self, who: str, path: str | None) -> None:
        """The site's SSH key for the installed OS, when one is set, must exist."""
        if path and not os.path.exists(os.path.expanduser(path)):
            self.add(who, f"provisioning.ssh_key: {path} does not exist")

    def secrets_config(self, refs: Iterable[str | None]) -> None:
        """The operator's secrets config, when any of ``refs`` is a ``cmd:`` reference: present and usable.

        This is the operator's setup, shared by every ``cmd:`` target; a
        NAME missing from it is left to the target that names it.
        """
        if not any(r and r.startswith("cmd:") for r in refs):
            return
        path = secrets_config_path()
        try:
            if not path.exists():
                self.add("secrets config", f"{path} does not exist, and the inventory has cmd: references (see docs/security.md)")
                return
            load_sources(path)
        except BadReference as e:
            self.add("secrets config", str(e))

    def refuse(self) -> None:
        """Raise one :class:`PreflightError` when anything was found."""
        if self._problems:
            raise PreflightError(self.workflow, self.problems)


def for_provision(conn: Any, ctxs: Iterable[Any]) -> Preflight:
    """What ``fleetctl provision`` will need for these servers (``ServerCtx``), checked; nothing is touched.

    The BMC credential of each server, the SSH credential of each switch its
    ports are moved on, and per site: the provisioning block, the VLAN when
    ports move, the SSH key file, and the Kubernetes join token.
    """
    pf = Preflight("provision")
    ctxs = list(ctxs)
    pf.bmc(c.bmc_ref for c in ctxs)
    sw_names = sorted({w.switch for c in ctxs for w in c.ports})
    if sw_names:
        pf.switches(resolve_switches(conn, sw_names))
    sites: dict[str, list[Any]] = {}
    for c in ctxs:
        sites.setdefault(c.site, []).append(c)
    for site, members in sites.items():
        who, c = f"site {site}", members[0]
        if any(m.ports for m in members) and not c.prov.get("vlan"):
            pf.add(who, "no provisioning.vlan (the install moves the servers' ports to it)")
        pf.ssh_key(who, c.prov.get("ssh_key"))
        k8s = c.prov.get("k8s") or {}
        if k8s.get("token"):
            pf.token(who, k8s["token"], what="provisioning.k8s.token")
    return pf


def for_firmware(servers: Iterable[Any]) -> Preflight:
    """What ``fleetctl firmware update`` will need (``targets.ServerRef``): each server's BMC URL and credential."""
    pf = Preflight("firmware update")
    pf.bmc(servers)
    return pf


def for_burnin(servers: Iterable[Any]) -> Preflight:
    """What ``fleetctl burnin`` will need besides SSH (checked by its plan): the BMC credential of each server that has a BMC."""
    pf = Preflight("burnin")
    pf.bmc(servers, optional=True)
    return pf


def for_sweep(servers: Iterable[Any], switches: Iterable[Any]) -> Preflight:
    """What ``fleetctl sweep`` refuses on: only the operator's secrets config (see the module's docstring)."""
    servers, switches = list(servers), list(switches)
    pf = Preflight("sweep")
    bmc_limits()  # a bad FLEETCTL_BMC_* setting is exit 2 here, not a shard that could not be read
    pf.secrets_config([s.credential for s in servers] + [s.snmp_credential for s in switches])
    return pf
