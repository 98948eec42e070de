"""Switch platforms as data: one YAML file each in ``platforms/``.

A platform file says how to log in (netmiko ``device_type``), which ``show``
commands to send and how to parse them, the configuration command sequences
for each field of a port, how to save, and which output means a command
failed. Vendor quirks live there, not in the driver's code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from fleetctl.errors import SwitchError

from .parse import PLATFORMS_DIR

CONFIG_KEYS = (
    "context",
    "access_vlan",
    "remove_access_vlan",
    "trunk_vlans",
    "trunk_vlan_add",
    "trunk_vlan_del",
    "admin_up",
    "admin_down",
    "description",
    "no_description",
    "save",
)


@dataclass(frozen=True)
class ShowCommand:
    """A show command, its parser and the map from our field names to the parser's."""

    key: str
    command: str
    parser: dict[str, Any]
    fields: dict[str, str] = field(default_factory=dict)
    requires: str | None = None
    # What recognised output looks like (parse.parse_show): each record's field
    # (our name) must fully match its pattern, and output that parses to no
    # records is recognised only where it matches ``empty`` (a table header
    # without rows, "Total entries displayed: 0"): anything else is garbage.
    expect: dict[str, str] = field(default_factory=dict)
    empty: str | None = None


@dataclass(frozen=True)
class Platform:
    name: str
    device_type: str
    description: str
    port_pattern: str
    interface_names: dict[str, str]
    show: dict[str, ShowCommand]
    config: dict[str, list[str]]
    errors: tuple[str, ...]
    exit_status: bool = False
    enable: bool = False
    privilege_prefix: str = ""
    bridge_pattern: str | None = None
    save_message: str | None = None
    # The most a command may print before the driver stops reading (characters, ~bytes):
    # the largest real output fleetctl knows is ~0.5 MB (`show interface switchport` of a
    # 576-port NX-OS chassis); the biggest recording held, 27 kB (EOS LLDP detail).
    max_output_bytes: int = 2 * 1024 * 1024
    source: str = ""

    def is_port(self, name: str) -> bool:
        return re.fullmatch(self.port_pattern, name) is not None

    def with_commands(self, **commands: str) -> Platform:
        """A copy with some show commands replaced (a quirk of one device or emulator)."""
        show = dict(self.show)
        for key, command in commands.items():
            if key not in show:
                raise SwitchError(f"platform {self.name} has no show command {key!r}")
            show[key] = replace(show[key], command=command)
        return replace(self, show=show)

    def supports(self, key: str) -> bool:
        return key in self.show


def platform_names() -> list[str]:
    """The platforms shipped with the driver, sorted."""
    return sorted(p.stem for p in PLATFORMS_DIR.glob("*.yaml"))


@cache
def load_platform(name_or_path: str) -> Platform:
    """A shipped platform by name (``eos``) or a platform file of one's own by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PLATFORMS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(platform_names())
        raise SwitchError(f"unknown switch platform {name_or_path!r} (known: {known})")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SwitchError(f"{path}: not valid YAML: {e}") from e
    return platform_from_dict(data, source=str(path))


def platform_from_dict(data: dict[str, Any], *, source: str = "<dict>") -> Platform:
    try:
        show = {
            key: ShowCommand(
                key=key,
                command=str(v["command"]),
                parser=dict(v["parser"]),
                fields={str(a): str(b) for a, b in (v.get("fields") or {}).items()},
                requires=v.get("requires"),
                expect={str(a): str(b) for a, b in (v.get("expect") or {}).items()},
                empty=None if v.get("empty") is None else str(v["empty"]),
            )
            for key, v in (data.get("show") or {}).items()
        }
        config = {
            str(k): [str(c) for c in (v or [])]
            for k, v in (data.get("config") or {}).items()
        }
        unknown = set(config) - set(CONFIG_KEYS)
        if unknown:
            raise SwitchError(f"{source}: unknown config keys {sorted(unknown)}")
        re.compile(data["port_pattern"])
        for cmd in show.values():  # a bad pattern is the platform file's fault, said at load
            for pattern in (*cmd.expect.values(), *([cmd.empty] if cmd.empty else [])):
                re.compile(pattern)
        return Platform(
            name=str(data["name"]),
            device_type=str(data["device_type"]),
            description=str(data.get("description", data["name"])),
            port_pattern=str(data["port_pattern"]),
            interface_names={
                str(a): str(b) for a, b in (data.get("interface_names") or {}).items()
            },
            show=show,
            config=config,
            errors=tuple(str(e) for e in data.get("errors") or ()),
            exit_status=bool(data.get("exit_status", False)),
            enable=bool(data.get("enable", False)),
            privilege_prefix=str(data.get("privilege_prefix", "")),
            bridge_pattern=data.get("bridge_pattern"),
            save_message=data.get("save_message"),
            max_output_bytes=int(data.get("max_output_bytes", Platform.max_output_bytes)),
            source=source,
        )
    except (KeyError, TypeError, ValueError, re.error) as e:
        raise SwitchError(
            f"{source}: bad platform file: {type(e).__name__}: {e}"
        ) from e
