"""The site-file format, as typed models (the edge where YAML becomes data).

Every model forbids unknown keys, so a typo is an error naming the field, not
a silently ignored setting. docs/site-files.md documents the same format.
"""

from __future__ import annotations

import re
from ipaddress import ip_address
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from fleetctl.errors import SecretError
from fleetctl.secrets import validate_ref

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Annotated[str, Field(pattern=NAME_RE, max_length=63)]

# Limits on free text (docs/site-files.md): a description or note, and every
# other text value (vendor, serial, version, port ...). A site file is not a
# place for megabytes: each of these ends up in the store and in every export.
TEXT_MAX = 4096
SHORT_MAX = 255
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tab and newline are text
_CONTROL_OR_NEWLINE_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _no_control(v: str) -> str:
    # A raw control character is refused by the loader with its column; these
    # came in through a YAML escape ("\0") or a JSON file.
    if m := _CONTROL_RE.search(v):
        raise ValueError(f"control character U+{ord(m.group()):04X} is not allowed")
    return v


def _one_line(v: str) -> str:
    if m := _CONTROL_OR_NEWLINE_RE.search(v):
        raise ValueError(f"control character U+{ord(m.group()):04X} is not allowed")
    return v


def _not_bool(v: Any) -> Any:
    # YAML reads `true`/`yes`/`on` as a boolean, and pydantic would take it as 1.
    if isinstance(v, bool):
        raise ValueError(f"Input should be a valid integer, not {str(v).lower()}")
    return v


# Free text (descriptions): at most TEXT_MAX characters, newlines allowed.
Text = Annotated[str, Field(max_length=TEXT_MAX), AfterValidator(_no_control)]
# Any other text value: one line, at most SHORT_MAX characters.
Short = Annotated[str, Field(max_length=SHORT_MAX), AfterValidator(_one_line)]
# An integer: never a boolean.
Int = Annotated[int, BeforeValidator(_not_bool)]
Vlan = Annotated[Int, Field(ge=1, le=4094)]
# A Kubernetes node's name: a DNS-1123 subdomain (lower case), as the API requires of a Node.
NODE_NAME_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NodeName = Annotated[str, Field(pattern=NODE_NAME_RE, max_length=253)]
#: The board kinds every inventory knows; any kind an installed accelerator driver registers (``fleetctl.accel``) is one
#: too, so a new kind needs no edit here (``fleetctl.burnin.criteria.board_kinds`` is the same vocabulary).
BOARD_KINDS = ("mncore2", "mncore", "gpu")


def _board_kind(v: str) -> str:
    from fleetctl.plugins import driver_names

    known = list(dict.fromkeys([*BOARD_KINDS, *driver_names("accel")]))
    if v not in known:
        raise ValueError(f"{v!r} is not a board kind (the board kinds: {', '.join(known)})")
    return v


BoardKind = Annotated[str, AfterValidator(_board_kind)]
ServerStateName = Literal[
    "registered", "inspected", "preparing", "installing", "configuring", "validating",
    "ready", "in-service", "maintenance", "failed", "rma",
]  # fmt: skip
BoardStateName = Literal["ok", "suspect", "failed", "rma", "unknown"]

_MAC_RE = re.compile(r"^[0-9a-f]{2}([:-]?)[0-9a-f]{2}(\1[0-9a-f]{2}){4}$")
_PCI_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_RANGE_RE = re.compile(r"\[(\d+)-(\d+)\]")


class Strict(BaseModel):
    # coerce_numbers_to_str: YAML reads `serial: 123456` as a number.
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, str_strip_whitespace=True)


def normalise_mac(value: str) -> str:
    v = value.strip().lower().replace(".", "")
    if not _MAC_RE.match(v):
        raise ValueError(f"{value!r} is not a MAC address")
    digits = re.sub(r"[^0-9a-f]", "", v)
    return ":".join(digits[i : i + 2] for i in range(0, 12, 2))


def expand_ports(patterns: list[str]) -> list[str]:
    """``["Ethernet[1-4]", "mgmt0"]`` -> ``Ethernet1 .. Ethernet4, mgmt0``."""
    out: list[str] = []
    for pattern in patterns:
        m = _RANGE_RE.search(pattern)
        if not m:
            out.append(pattern)
            continue
        lo, hi = int(m.group(1)), int(m.group(2))
        if hi < lo or hi - lo > 4096:
            raise ValueError(f"bad port range in {pattern!r}")
        for i in range(lo, hi + 1):
            out.extend(expand_ports([pattern[: m.start()] + str(i) + pattern[m.end() :]]))
    return out


class PowerSpec(Strict):
    idle: Annotated[Int, Field(ge=0)]
    peak: Annotated[Int, Field(ge=0)]

    @model_validator(mode="after")
    def _peak_above_idle(self) -> PowerSpec:
        if self.peak < self.idle:
            raise ValueError("peak must be at least idle")
        return self


class BoardsSpec(Strict):
    kind: BoardKind
    count: Annotated[Int, Field(ge=1, le=64)]


class ModelSpec(Strict):
    """A hardware model (device type)."""

    name: Name
    kind: Literal["server", "switch"]
    vendor: Short
    model: Short
    height: Annotated[Int, Field(ge=1, le=16)] = 1
    power: PowerSpec | None = None
    boards: BoardsSpec | None = None
    bios_profile: Short | None = None
    firmware: dict[Short, Short] = Field(default_factory=dict)
    ports: list[Short] | None = None
    # The driver that manages devices of this model (an entry point of the
    # fleetctl.bmc group for servers, fleetctl.switch for switches); None:
    # redfish for servers, netmiko for switches.
    driver: Name | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> ModelSpec:
        if self.kind == "switch":
            if not self.ports:
                raise ValueError("a switch model needs ports")
            if self.boards:
                raise ValueError("a switch model holds no accelerator boards")
        elif self.ports:
            raise ValueError("only switch models have ports")
        if self.ports:
            names = expand_ports(self.ports)
            if len(set(names)) != len(names):
                raise ValueError("ports repeat a name")
        return self


class NicSpec(Strict):
    name: Name
    mac: Short | None = None

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str | None) -> str | None:
        return None if v is None else normalise_mac(v)


class BoardSpec(Strict):
    serial: Annotated[Short, Field(min_length=1)]
    # Where boards share a serial (NVIDIA GB200/GB300: one per superchip module,
    # shared by its two GPUs), which of them: 1.. A board is (serial, position).
    position: Annotated[Int, Field(ge=1, le=63)] | None = None
    slot: Annotated[Int, Field(ge=0, le=63)]
    kind: BoardKind | None = None  # defaults to the model's board kind
    pci: Short | None = None
    model: Short | None = None
    firmware: dict[Short, Short] = Field(default_factory=dict)
    state: BoardStateName = "ok"

    @field_validator("pci")
    @classmethod
    def _pci(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.lower()
        if not _PCI_RE.match(v):
            raise ValueError(f"{v!r} is not a PCI address like 0000:17:00.0")
        return v


class ServerSpec(Strict):
    name: Name
    serial: Annotated[Short, Field(min_length=1)]
    model: Name
    position: Annotated[Int, Field(ge=1)]
    bmc: Short | None = None
    system_id: Short | None = None
    credential: Short | None = None
    fingerprint: Short | None = None
    nics: list[NicSpec] = Field(default_factory=list)
    boards: list[BoardSpec] = Field(default_factory=list)
    tags: list[Name] = Field(default_factory=list)
    # Honoured when the server is created; afterwards the lifecycle owns it.
    state: ServerStateName = "registered"
    # The installed OS over SSH: "host" or "host:port" (default: the server's
    # name, port 22); extra Ansible host variables for its playbooks.
    host: Short | None = None
    host_vars: dict[str, Any] = Field(default_factory=dict)
    # Its Kubernetes node (docs/kubernetes.md): the cluster (a name under the
    # site's clusters; default: the site's only one) and the node's name
    # (default: learned, the server's name or its host name).
    cluster: Name | None = None
    node: NodeName | None = None

    @field_validator("host")
    @classmethod
    def _host(cls, v: str | None) -> str | None:
        return None if v is None else host_port(v, "host")

    @field_validator("host_vars")
    @classmethod
    def _host_vars(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"host_vars: {key!r} is not an Ansible variable name")
            if _SECRET_VAR_RE.search(key):
                # Secrets stay behind credential references, never in the inventory.
                raise ValueError(f"host_vars: {key!r} would hold a secret; use a credential reference")
        return v

    @field_validator("bmc")
    @classmethod
    def _bmc(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = urlsplit(v)
        if parts.username is not None or parts.password is not None:
            # Never let a secret into the inventory through the URL.
            raise ValueError("a BMC URL must not carry a user or password; use a credential reference")
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"{v!r} is not an https:// (or explicit http://) BMC URL")
        return v.rstrip("/")

    @field_validator("credential")
    @classmethod
    def _cred(cls, v: str | None) -> str | None:
        if v is None:
            return None

        try:
            return validate_ref(v)
        except SecretError as e:
            raise ValueError(str(e)) from None

    @field_validator("fingerprint")
    @classmethod
    def _fp(cls, v: str | None) -> str | None:
        if v is None:
            return None
        digits = v.replace(":", "").lower()
        if not re.fullmatch(r"[0-9a-f]{64}", digits):
            raise ValueError("fingerprint must be a SHA-256 in hex")
        return digits


_SECRET_VAR_RE = re.compile(r"pass(word)?|secret|token|private_key_data|vault", re.IGNORECASE)


def host_port(v: str, what: str) -> str:
    """``host`` or ``host:port`` (an IPv6 address in brackets with a port), checked; returned as given."""
    host, port = v, None
    if v.startswith("["):
        host, _, rest = v[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif v.count(":") == 1:
        host, _, port = v.partition(":")
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"{what} {v!r}: the port must be 1-65535")
    try:
        ip_address(host)
    except ValueError:
        if not re.fullmatch(r"[A-Za-z0-9.-]+", host):
            raise ValueError(f"{what} {v!r} is neither an IP address nor a host name") from None
    return v


class SnmpSpec(Strict):
    """How to poll a switch over SNMP; the community or v3 keys live behind a reference.

    v2c: the reference's password is the community. v3 (authPriv, SHA/AES):
    its username is the v3 user and its password both the auth and priv key.
    """

    version: Literal["2c", "3"] = "2c"
    credential: Short
    port: Annotated[Int, Field(ge=1, le=65535)] = 161

    @field_validator("credential")
    @classmethod
    def _cred(cls, v: str) -> str:
        return ServerSpec._cred.__func__(cls, v)  # type: ignore[attr-defined]


class ClusterSpec(Strict):
    """A Kubernetes cluster the site's servers are nodes of, and how to reach it: a reference, never a credential.

    Either a kubeconfig file (its path, and the context to use: the file's
    current context when left out) or ``in_cluster: true`` (the service
    account Kubernetes mounts into a pod fleetctl runs in).
    """

    name: Name
    kubeconfig: Text | None = None
    context: Short | None = None
    in_cluster: bool = False

    @field_validator("kubeconfig")
    @classmethod
    def _kubeconfig(cls, v: str | None) -> str | None:
        if v is None:
            return None
        # A path, never the file's content: that holds a token or a client key.
        if "\n" in v or v.lstrip().startswith(("apiVersion", "{")):
            raise ValueError("kubeconfig is the path of a kubeconfig file, never its content")
        if not v.startswith(("/", "~/")):
            raise ValueError("kubeconfig must be an absolute path (or start with ~/)")
        return v

    @model_validator(mode="after")
    def _one_way(self) -> ClusterSpec:
        if self.in_cluster == (self.kubeconfig is not None):
            raise ValueError("a cluster is reached through a kubeconfig (kubeconfig:, context:) or in_cluster: true, one of them")
        if self.in_cluster and self.context is not None:
            raise ValueError("context: belongs with kubeconfig:, not in_cluster")
        return self


class SwitchSpec(Strict):
    name: Name
    model: Name
    platform: Literal["sonic", "eos", "nxos", "linux"]
    role: Literal["leaf", "spine", "management"]
    address: Short
    position: Annotated[Int, Field(ge=1)]
    serial: Short | None = None
    credential: Short | None = None
    ssh_port: Annotated[Int, Field(ge=1, le=65535)] = 22
    snmp: SnmpSpec | None = None

    @field_validator("address")
    @classmethod
    def _addr(cls, v: str) -> str:
        try:
            return str(ip_address(v))
        except ValueError:
            if re.fullmatch(r"[A-Za-z0-9.-]+", v):
                return v.lower()
            raise ValueError(f"{v!r} is neither an IP address nor a host name") from None

    _cred = field_validator("credential")(ServerSpec._cred.__func__)  # type: ignore[attr-defined]


class RackSpec(Strict):
    name: Name
    row: Short | None = None
    position: Annotated[Int, Field(ge=0)] | None = None
    height: Annotated[Int, Field(ge=1, le=60)] = 42
    power_budget: Annotated[Int, Field(ge=0)] | None = None
    servers: list[ServerSpec] = Field(default_factory=list)
    switches: list[SwitchSpec] = Field(default_factory=list)


class CableSpec(Strict):
    """One planned cable, from a switch port to a server NIC or a peer switch port."""

    switch: Name
    port: Short
    server: Name | None = None
    nic: Name | None = None
    peer: Name | None = None
    peer_port: Short | None = None
    vlans: list[Vlan] = Field(default_factory=list)
    mode: Literal["access", "trunk"] | None = None

    @model_validator(mode="after")
    def _ends(self) -> CableSpec:
        to_server = self.server is not None or self.nic is not None
        to_switch = self.peer is not None or self.peer_port is not None
        if to_server == to_switch:
            raise ValueError("a cable goes to a server (server, nic) or to a switch (peer, peer_port)")
        if to_server and (self.server is None or self.nic is None):
            raise ValueError("a cable to a server needs both server and nic")
        if to_switch and (self.peer is None or self.peer_port is None):
            raise ValueError("a cable to a switch needs both peer and peer_port")
        if self.mode is None:
            self.mode = "trunk" if to_switch or len(self.vlans) > 1 else "access"
        if self.mode == "access" and len(self.vlans) != 1:
            raise ValueError("an access port carries exactly one VLAN")
        if len(set(self.vlans)) != len(self.vlans):
            raise ValueError("vlans repeat")
        return self


def _http_url(v: str, what: str) -> str:
    """An http(s) URL with a host and no user or password in it."""
    parts = urlsplit(v)
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} must not carry a user or password")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{v!r} is not an http:// or https:// URL")
    return v


# Placeholders a firmware image URL template may use (fleetctl/workflows/firmware.py):
# {base} firmware_images, {id} the BMC's component id, {component} the baseline's, {version}.
FIRMWARE_TEMPLATE_FIELDS = ("base", "id", "component", "version")
_POSIX_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$")


class K8sJoinSpec(Strict):
    """What a server needs to join a Kubernetes cluster (kubeadm join)."""

    endpoint: Short  # the API server, host:port
    token: Short  # a credential reference to the bootstrap token, never the token
    ca_cert_hash: Short  # sha256:<64 hex>, the cluster CA's public key pin

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]  # [IPv6]:port
        ok_port = sep and port.isdigit() and 1 <= int(port) <= 65535
        try:
            ip_address(host)
            ok_host = True
        except ValueError:
            ok_host = bool(_HOST_RE.match(host)) and len(host) <= 253
        if not (ok_port and ok_host):
            raise ValueError(f"{v!r} is not host:port (the API server, like k8s-api.tyo1.example:6443)")
        return v

    @field_validator("token")
    @classmethod
    def _token(cls, v: str) -> str:
        try:
            return validate_ref(v)
        except SecretError as e:
            # Not echoed: what was written may be the token itself (validate_ref never repeats it either).
            if v.partition(":")[0] in ("env", "file", "cmd"):
                raise ValueError(str(e)) from None  # a reference of a known form, malformed: say which rule it breaks
            raise ValueError(
                "the join token must be a credential reference (env:NAME, file:/ABS/PATH or cmd:NAME), never the token itself"
            ) from None

    @field_validator("ca_cert_hash")
    @classmethod
    def _hash(cls, v: str) -> str:
        algo, sep, digits = v.partition(":")
        if algo.lower() != "sha256" or not sep or not re.fullmatch(r"[0-9a-fA-F]{64}", digits):
            raise ValueError("ca_cert_hash must be sha256:<64 hex digits> (as kubeadm prints it)")
        return "sha256:" + digits.lower()


class ProvisioningSpec(Strict):
    """How a site installs its servers: network, boot, images, and what comes after.

    Defaults here are also in fleetctl/inventory/queries.py (PROVISIONING_DEFAULTS),
    which the read path uses without importing pydantic; a test keeps them equal.
    """

    vlan: Vlan  # the VLAN data ports sit on (access/native) during the OS install
    boot: Literal["pxe", "vmedia"]  # one-time boot source for the install
    # The install ISO; required for vmedia. validate_default: the check runs when it is left out.
    image: Text | None = Field(default=None, validate_default=True)
    firmware_images: Text | None = None  # base URL the BMCs fetch firmware images from
    firmware_template: Text = "{base}/{id}-{version}.bin"
    install_timeout: Annotated[Int, Field(ge=1)] = 3600  # seconds to wait for the installed OS
    ssh_user: Short = "root"
    ssh_key: Text | None = None  # path of the private key (never the key)
    # A known_hosts file the hosts' keys are checked against strictly; None:
    # fleetctl's own, where a new host's key is accepted on first contact.
    known_hosts: Text | None = None
    k8s: K8sJoinSpec | None = None

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            if info.data.get("boot") == "vmedia":
                raise ValueError("boot: vmedia needs an image (the install ISO URL)")
            return None
        return _http_url(v, "an image URL")

    @field_validator("firmware_images")
    @classmethod
    def _fw_base(cls, v: str | None) -> str | None:
        return None if v is None else _http_url(v, "a firmware image URL").rstrip("/")

    @field_validator("firmware_template")
    @classmethod
    def _template(cls, v: str) -> str:
        from string import Formatter

        try:
            fields = [(f, spec, conv) for _, f, spec, conv in Formatter().parse(v) if f is not None]
        except ValueError as e:
            raise ValueError(f"firmware_template {v!r}: {e}") from None
        allowed = " ".join("{" + n + "}" for n in FIRMWARE_TEMPLATE_FIELDS)
        for name, spec, conv in fields:
            if name not in FIRMWARE_TEMPLATE_FIELDS:
                raise ValueError(f"firmware_template may use only {allowed}, not {{{name}}}")
            # A format spec can ask str.format for gigabytes ({id:>999999999}); a
            # conversion ({id!r}) puts quotes in a URL. The fields are used as they are.
            if spec or conv:
                shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
                raise ValueError(f"{shown}: a format spec or conversion is not allowed; write {{{name}}}")
        return v

    @field_validator("ssh_user")
    @classmethod
    def _user(cls, v: str) -> str:
        if not _POSIX_USER_RE.match(v):
            raise ValueError(f"{v!r} is not a user name")
        return v

    @field_validator("known_hosts")
    @classmethod
    def _known_hosts(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("/", "~/")):
            raise ValueError("known_hosts must be an absolute path (or start with ~/)")
        return v

    @field_validator("ssh_key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if "\n" in v or "PRIVATE KEY" in v or v.startswith(("ssh-", "ecdsa-")):
            raise ValueError("ssh_key is the path of the private key file, never the key itself")
        if not v.startswith(("/", "~/")):
            raise ValueError("ssh_key must be an absolute path (or start with ~/) of the private key file")
        return v


class SiteSpec(Strict):
    name: Name
    description: Text | None = None
    provisioning: ProvisioningSpec | None = None
    clusters: list[ClusterSpec] = Field(default_factory=list)
    racks: list[RackSpec] = Field(default_factory=list)
    cabling: list[CableSpec] = Field(default_factory=list)


class BiosProfileSpec(Strict):
    """BIOS settings a hardware model's servers should have (attribute -> value)."""

    name: Name
    description: Text | None = None
    attributes: dict[Short, Short | bool | int | float] = Field(default_factory=dict)

    @field_validator("attributes")
    @classmethod
    def _some(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            raise ValueError("a BIOS profile sets at least one attribute")
        return v


class SiteFile(Strict):
    """One file: BIOS profiles, hardware models, sites, or any of them."""

    bios_profiles: list[BiosProfileSpec] = Field(default_factory=list)
    models: list[ModelSpec] = Field(default_factory=list)
    sites: list[SiteSpec] = Field(default_factory=list)
