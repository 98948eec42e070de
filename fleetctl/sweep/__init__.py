"""The daily health sweep: read every BMC and switch, judge, remember.

- :mod:`.model`: statuses, findings and the check metadata (results are data);
- :mod:`.registry`: the one registry of checks (built-in, and plugins from the
  ``fleetctl.checks`` entry-point group);
- :mod:`.server_checks`, :mod:`.switch_checks`: the built-in checks, pure
  functions of what was read and what the inventory expects;
- :mod:`.collect`: what is read from a BMC (one session, read once) and the
  expectations loaded from the inventory;
- :mod:`.engine`: a sweep run, journaled target by target;
- :mod:`.history`: runs, findings, diffs, acks and retention in the store.
"""
