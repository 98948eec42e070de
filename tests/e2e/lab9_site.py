"""A small lab site for the issue-20 e2e tests: an NVIDIA GB200-like tray and an HPE iLO 6 server.

The lab serves each by its model's vendor (fleetctl_lab.inventory.flavour_for):
NVIDIA -> the ``nvidia`` flavour (GPUs as Processors, one serial per processor
module shared by its two GPUs: the tray's boards are declared so, each
module's serial with the GPU's position), HPE ProLiant Gen11 -> ``ilo6`` (a server that
is off reads its temperatures Absent, reading 0, thresholds 0).
"""

from __future__ import annotations

SITE = """\
models:
- name: gb200-tray
  kind: server
  vendor: NVIDIA
  model: GB200 NVL Compute Tray
  height: 1
  boards:
    kind: gpu
    count: 4
- name: dl380-gen11
  kind: server
  vendor: HPE
  model: ProLiant DL380 Gen11
  height: 2
sites:
- name: lab9
  racks:
  - name: r1
    height: 10
    servers:
    - name: gb-01
      serial: SYS-GB-01
      model: gb200-tray
      position: 1
      bmc: https://gb-01-bmc.lab9.example
      credential: env:BMC_LAB9
      boards:
      - {serial: GB-MOD-A, position: 1, slot: 0, model: NVIDIA GB200}
      - {serial: GB-MOD-A, position: 2, slot: 1, model: NVIDIA GB200}
      - {serial: GB-MOD-B, position: 1, slot: 2, model: NVIDIA GB200}
      - {serial: GB-MOD-B, position: 2, slot: 3, model: NVIDIA GB200}
    - name: dl-01
      serial: SYS-DL-01
      model: dl380-gen11
      position: 3
      bmc: https://dl-01-bmc.lab9.example
      credential: env:BMC_LAB9
"""
