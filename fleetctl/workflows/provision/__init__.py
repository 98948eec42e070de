"""`fleetctl provision`: from cabled and powered to ready, per server, as journaled steps.

Every server of the target is worked by its own coroutine, all in one event
loop; the shared resources are behind small coordinators (a rack's power
budget, a switch's SSH sessions, Ansible batches).

The journal (:mod:`fleetctl.workflows.journal`) is the Job/JobStep tables. A
pass over a server begins with a ``provision.begin`` step; each step is a row
written ``running`` before it acts and ``succeeded``/``failed`` after.
Re-running resumes the pass: steps that succeeded are not repeated, and a
step left ``running`` by a process that died is run again, which is safe
because every step checks before it acts (firmware already at the baseline is
not flashed; a boot that happened is recognised from the consumed one-time
override; ports already right are not touched). The power step writes what it
is about to do before doing it.

One failing server never stops the others: a step's failure moves that
server to ``failed`` with the step and the reason, and the run goes on.

The modules:

- :mod:`.model`: options, what is known of a server, its progress, a failure
  (step, kind, reason) and the results;
- :mod:`.context`: the inventory read once at the start; reaching a host's OS;
- :mod:`.steps`: the table of steps (name, state, goal, check, run);
- :mod:`.coordinators`: the power gate, the switch batcher, the Ansible batcher;
- :mod:`.plan`: the dry run;
- :mod:`.engine`: the inventory read, the refusals, locks, the journal, the
  coordinators, and each server through the steps (:class:`Provisioner`);
- :mod:`.described`: the workflow described once (preflight per site, open,
  a unit per server, close), run in process (:func:`provision`) or on
  Temporal (``fleetctl.scaleout``) alike.
"""

from fleetctl.workflows.provision.described import PROVISION, ProvisionResult, ServerDone, provision, run_here
from fleetctl.workflows.provision.engine import Provisioner, worst_exit
from fleetctl.workflows.provision.model import ErrorKind, Failure, Options, Progress, Result, ServerCtx, StepFailed
from fleetctl.workflows.provision.steps import STEP_NAMES, STEPS, Step

__all__ = [
    "PROVISION",
    "STEPS",
    "STEP_NAMES",
    "ErrorKind",
    "Failure",
    "Options",
    "Progress",
    "ProvisionResult",
    "Provisioner",
    "Result",
    "ServerCtx",
    "ServerDone",
    "Step",
    "StepFailed",
    "provision",
    "run_here",
    "worst_exit",
]
