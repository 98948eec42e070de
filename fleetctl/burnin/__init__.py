"""Accelerator burn-in: stages on each host, a verdict per board, RMA for the failing ones.

``criteria`` (what a board must show, as data per kind and model),
``verdict`` (evidence in, verdict out: pure), ``host`` (the stages on one
host over SSH), ``engine`` (which servers, preflight, locks, the run, the
store), ``history`` (what was stored), ``report`` (the HTML page).
"""
