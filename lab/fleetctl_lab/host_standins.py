"""Stand-ins for what a provisioned host runs, as shell scripts.

The provisioning playbooks (``playbooks/``) reach the package manager, the
accelerator tools, ``sysctl`` and ``kubeadm`` only through variables
(``playbooks/README.md``, "In a lab"), so a lab host points them at these
harmless scripts. Each generator returns the text of a ``/bin/sh`` script;
paths are baked in, so a script works the same whether it is run over the
lab's SSH or by ``ansible_connection: local``.

The contracts, as the playbooks use them:

- ``fake-pkg install STATE LOG PKG...``: records ``PKG...`` as one line of
  LOG and marks each package installed (a file ``STATE/<pkg>``);
  ``fake-pkg query STATE PKG...`` prints ``<pkg> installed`` for each
  installed one; ``fake-pkg update LOG`` appends ``update`` to LOG.
- ``gpfn3-smi list``: one line per board, ``<index>: <device name>``
  (``0: mnc2p27s0``), the format the public MN-Core SDK documentation
  shows, read from the device folder at run time, so a missing device node
  is a missing board.
- ``nvidia-smi -L``: ``GPU <i>: <model> (UUID: GPU-...)`` for each GPU whose
  ``nvidia<slot-index>`` node is in the device folder.
- ``sysctl ARGS``: appends ``sysctl ARGS`` to a calls log.
- ``kubeadm join ENDPOINT ...``: appends ``kubeadm join ENDPOINT`` to a calls
  log and writes ``<root>/etc/kubernetes/kubelet.conf``, as a real join
  does, so a second run skips the join.

``fleetctl_drivers.accel.mncore.parse_gpfn3_list`` reads what the stand-in
prints (tests/unit/lab/test_hosts.py runs one through the other).
"""

from __future__ import annotations

import shlex
import stat
from collections.abc import Iterable
from pathlib import Path

FAKE_PKG = """#!/bin/sh
# fake-pkg install STATE LOG PKG... | query STATE PKG... | update LOG
cmd=$1; shift
case $cmd in
  install) state=$1 log=$2; shift 2
           mkdir -p "$state"
           echo "$*" >> "$log"
           for p in "$@"; do touch "$state/$p"; done ;;
  query)   state=$1; shift
           for p in "$@"; do [ -e "$state/$p" ] && echo "$p installed"; done; exit 0 ;;
  update)  echo update >> "$1" ;;
  *)       echo "usage: fake-pkg install STATE LOG PKG... | query STATE PKG... | update LOG" >&2; exit 2 ;;
esac
"""


def gpfn3_smi(dev_dir: Path | str) -> str:
    """``gpfn3-smi list`` over the ``mnc2p*`` nodes present in ``dev_dir`` at run time."""
    return f"""#!/bin/sh
# Lab stand-in for gpfn3-smi: `list` names the boards whose device node exists.
dev={shlex.quote(str(dev_dir))}
[ "$1" = list ] || {{ echo "usage: gpfn3-smi list" >&2; exit 2; }}
i=0
for d in "$dev"/mnc2p*; do
  [ -e "$d" ] || continue
  echo "$i: ${{d##*/}}"
  i=$((i + 1))
done
"""


def nvidia_smi(dev_dir: Path | str, gpus: Iterable[tuple[int, str, str]]) -> str:
    """``nvidia-smi -L`` for ``gpus`` = (node index, model, UUID), listing those whose node exists."""
    lines = "\n".join(f"gpu {n} {shlex.quote(model)} {shlex.quote(uuid)}" for n, model, uuid in gpus)
    return f"""#!/bin/sh
# Lab stand-in for nvidia-smi: -L lists the GPUs whose /dev/nvidia<n> node exists.
dev={shlex.quote(str(dev_dir))}
[ "$1" = -L ] || {{ echo "usage: nvidia-smi -L" >&2; exit 2; }}
i=0
gpu() {{ [ -e "$dev/nvidia$1" ] || return 0; echo "GPU $i: $2 (UUID: $3)"; i=$((i + 1)); }}
{lines}
"""


def sysctl(calls_log: Path | str) -> str:
    """Records ``sysctl ARGS`` in ``calls_log``; changes nothing."""
    return f"""#!/bin/sh
echo "sysctl $*" >> {shlex.quote(str(calls_log))}
"""


def kubeadm(calls_log: Path | str, root: Path | str) -> str:
    """``kubeadm join``: records the join and leaves what a joined node has (its kubelet.conf)."""
    log, kube = shlex.quote(str(calls_log)), shlex.quote(f"{root}/etc/kubernetes")
    return f"""#!/bin/sh
[ "$1" = join ] || {{ echo "lab kubeadm: only join" >&2; exit 2; }}
echo "kubeadm join $2" >> {log}
mkdir -p {kube} && echo joined > {kube}/kubelet.conf
"""


def write_script(path: Path, text: str) -> str:
    """Write an executable script; returns its path as a string."""
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)
