"""The scale-out engine: fleetctl's workflows on Temporal, with workers per site.

The embedded engine (one process, :mod:`fleetctl.workflows`) stays the
default. With ``FLEETCTL_TEMPORAL=HOST:PORT`` set, a command starts a parent
workflow per command and a child workflow per server (id
``provision:<server>``, so a server is never worked by two at once) on the
task queue of the server's site, which only that site's workers
(``fleetctl worker --site SITE``) poll: a site's BMCs, switches and hosts are
reached only from inside the site.

One definition of each step, two ways to sequence them: the activities call
the embedded engine's own step functions
(:meth:`fleetctl.workflows.provision.engine.Provisioner.run_step`), so the
journal, the locks and each step's check before it acts are the same.

The modules:

- :mod:`.queues`: task queue names, timeouts and retry policies (no imports
  but the standard library: the workflow sandbox re-imports it);
- :mod:`.run_wf`, :mod:`.run_act`: any described workflow
  (:mod:`fleetctl.workflows.describe`: burn-in, the sweep's reading): one
  parent workflow ``fleetctl.run`` and one activity set, dispatching by the
  description's name;
- :mod:`.workflows`, :mod:`.firmware_wf`: provisioning's and the firmware
  campaign's own workflows (deterministic; no I/O);
- :mod:`.activities`: provisioning's activities, run by the workers;
- :mod:`.worker`: ``fleetctl worker``;
- :mod:`.client`: connecting, the store check, starting and following a run.
"""
