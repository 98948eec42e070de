# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# `make test` (and CI) leave out the tests marked heavy (minutes each: kills at 20 moments,
# eight processes at once, Temporal end to end); `make test-heavy` runs only those.
PYTEST_ARGS ?= -m "not heavy"

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
	$(PY) -m pytest -m heavy

# Linter and type checker (configured in pyproject.toml): both run, and any
# finding of either fails.
lint: $(STAMP)
	@rc=0; \
	echo "ruff check ."; $(VENV)/bin/ruff check . || rc=1; \
	echo "mypy"; $(VENV)/bin/mypy || rc=1; \
	exit $$rc

bench: $(STAMP)
	$(PY) bench/cli.py
	$(PY) bench/inventory.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info drivers/*.egg-info
