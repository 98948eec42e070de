"""Site-file text for the inventory tests: a small valid site written in block style.

Every field sits on its own line, so a test can say which line an error must
point at by naming a piece of text that is on it (``line_of``).
"""

from __future__ import annotations

# A minimal valid inventory: three models, one site, one 10U rack with two
# servers (one 1U holding two MN-Core 2 boards, one 2U) and a leaf switch,
# both servers cabled to the switch.
BASE = """\
models:
- name: srv1u
  kind: server
  vendor: Acme
  model: S1
  height: 1
  boards:
    kind: mncore2
    count: 2
- name: srv2u
  kind: server
  vendor: Acme
  model: S2
  height: 2
- name: sw8
  kind: switch
  vendor: Acme
  model: W8
  height: 1
  ports:
  - Ethernet[1-8]
  - mgmt0
sites:
- name: lab1
  racks:
  - name: r1
    height: 10
    servers:
    - name: s1
      serial: SER-1
      model: srv1u
      position: 1
      bmc: https://10.0.0.1
      credential: env:BMC_LAB
      nics:
      - name: eth0
        mac: 02:00:00:00:00:01
      boards:
      - serial: B-1
        slot: 0
      - serial: B-2
        slot: 1
    - name: s2
      serial: SER-2
      model: srv2u
      position: 2
      bmc: https://10.0.0.2
      nics:
      - name: eth0
        mac: 02:00:00:00:00:02
      - name: eth1
        mac: 02:00:00:00:00:03
    switches:
    - name: sw1
      model: sw8
      platform: sonic
      role: leaf
      address: 10.1.0.1
      position: 10
  cabling:
  - switch: sw1
    port: Ethernet1
    server: s1
    nic: eth0
    vlans:
    - 100
  - switch: sw1
    port: Ethernet2
    server: s2
    nic: eth0
    vlans:
    - 100
"""


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the ``nth`` occurrence of ``needle`` in ``text``."""
    lines = text.splitlines()
    seen = 0
    for i, line in enumerate(lines, 1):
        if needle in line:
            seen += 1
            if seen == nth:
                return i
    raise AssertionError(f"{needle!r} (occurrence {nth}) not in the text")


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` (which must occur exactly once) replaced."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)
