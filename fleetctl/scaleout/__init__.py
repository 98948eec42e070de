"""The scale-out engine: fleetctl's workflows on Temporal, with workers per site.

The embedded engine (one process, :mod:`fleetctl.workflows`) stays the
default. With ``FLEETCTL_TEMPORAL=HOST:PORT`` set, a command starts a parent
workflow per command, whose units (a server's provisioning, burn-in, a shard
of the sweep) run on the task queue of their site, which only that site's
workers (``fleetctl worker --site SITE``) poll: a site's BMCs, switches and
hosts are reached only from inside the site.

One description of each workflow, two engines: the activities call the
description's own ``open``, ``unit`` and ``close``
(:mod:`fleetctl.workflows.describe`), the very functions the in-process loop
calls, so the journal, the locks and each step's check before it acts are
the same.

The modules:

- :mod:`.queues`: task queue names, timeouts and retry policies (no imports
  but the standard library: the workflow sandbox re-imports it);
- :mod:`.run_wf`, :mod:`.run_act`: any described workflow
  (:mod:`fleetctl.workflows.describe`: provisioning, burn-in, the sweep's
  reading, the firmware campaign): one parent workflow ``fleetctl.run`` and
  one activity set, dispatching by the description's name;
- :mod:`.activities`: what the activities share (heartbeating, the store check);
- :mod:`.worker`: ``fleetctl worker``;
- :mod:`.client`: connecting, the store check, starting and following a run.
"""
