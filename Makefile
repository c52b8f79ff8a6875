# pinlab: `make demo` and `make test` work on a fresh machine (they run `make install` first).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.pinlab-installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find src native -type f -not -name '*.pyc' 2>/dev/null)
DEMO_DIR ?= demo-output

.PHONY: install system-packages test check test-busy demo bench clean docs dist

install: system-packages $(STAMP)

# Debian packages pinlab needs (hwloc, numactl, likwid, LLVM OpenMP, qemu for the NUMA VM tests).
# Installs what is missing when run as root; otherwise says what to install. Quick when all is there.
system-packages:
	@tools/install-system-packages.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) $(SOURCES)
	$(PY) -m pip install -q "scikit-build-core>=0.10" "setuptools-scm>=8" "click>=8.1" "cmake>=3.18" ninja
	$(PY) -m pip install -q --no-build-isolation ".[test,docs,dist]"
	@touch $(STAMP)

# The release files: an sdist and a wheel built from it by the standard front end (python -m build,
# in an isolated environment), the wheel repaired by auditwheel to the manylinux tag its libraries
# allow (the OpenMP runtimes the probes link are copied in). Both land in DIST.
DIST ?= dist
dist: install
	rm -rf build/dist-raw
	$(PY) -m build --outdir build/dist-raw .
	mkdir -p $(DIST)
	cp build/dist-raw/*.tar.gz $(DIST)/
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/auditwheel repair --wheel-dir $(DIST) build/dist-raw/*.whl
	@ls -l $(DIST)

test: install check
	$(PY) -m pytest -q

# Static checks (docs/development/architecture.md): lint, formatting, the import layers, types.
# lint-imports reads the source tree (PYTHONPATH=src), not the installed copy.
check: install
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/ruff format --check src tests bench tools
	PYTHONPATH=src $(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The whole suite beside co-runners on every CPU (tools/with-load: 8 per CPU, half of them bursty),
# as on a shared CI host: every test must hold there too. BUSY_PER_CPU sets how many; the suite
# runs as BUSY_JOBS pytest processes at once (tools/pytest-parts: one directory of tests at a
# time each), which keeps the machine busier still and the run inside a working session.
BUSY_PER_CPU ?= 8
BUSY_JOBS ?= 4
test-busy: install
	tools/with-load --per-cpu $(BUSY_PER_CPU) -- $(PY) tools/pytest-parts --jobs $(BUSY_JOBS)

demo: install
	@mkdir -p $(DEMO_DIR)
	$(VENV)/bin/pinlab check
	$(VENV)/bin/pinlab topology
	@n=$$($(VENV)/bin/pinlab topology -f json | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["summary"]["cores"])'); \
	for s in compact scatter; do \
		echo "== $$s, $$n threads on this machine"; \
		$(VENV)/bin/pinlab place -s $$s -n $$n --picture $(DEMO_DIR)/this-$$s.svg || exit 1; \
		echo "== $$s, 4 threads on the bundled clovertown (2 sockets x 2 L2 pairs), as OpenMP variables"; \
		$(VENV)/bin/pinlab place -t clovertown -s $$s -n 4 -f omp --picture $(DEMO_DIR)/clovertown-$$s.png || exit 1; \
	done; \
	rm -f $(DEMO_DIR)/demo.db $(DEMO_DIR)/demo.db-wal $(DEMO_DIR)/demo.db-shm; \
	echo "== study: stream, mb and primes, none/compact/scatter/random, alone and with a busy co-runner, $$n threads"; \
	$(VENV)/bin/pinlab study --db $(DEMO_DIR)/demo.db --name demo -s none,compact,scatter,random -n $$n --runs 8 \
		--corun none,cpu:1 --counters default --workload "stream:--size 2M --ntimes 3" --workload "mb:--n $$n --m 20000 --reps 100" \
		--workload "primes:--limit 300000" || exit 1; \
	echo "== adaptive study: primes, none/compact/scatter, runs added until every comparison is decided"; \
	$(VENV)/bin/pinlab study --db $(DEMO_DIR)/demo.db --name demo-auto -s none,compact,scatter -n $$n --runs auto --max-runs 40 \
		--workload "primes:--limit 300000" || exit 1; \
	$(VENV)/bin/pinlab report demo-auto --db $(DEMO_DIR)/demo.db --html $(DEMO_DIR)/report-auto || exit 1; \
	$(VENV)/bin/pinlab report demo --db $(DEMO_DIR)/demo.db --csv $(DEMO_DIR)/csv --html $(DEMO_DIR)/report
	@echo "pictures: $$(ls $(DEMO_DIR)/*.svg $(DEMO_DIR)/*.png | tr '\n' ' ')"
	@echo "HTML report: $(CURDIR)/$(DEMO_DIR)/report/index.html (adaptive study: $(CURDIR)/$(DEMO_DIR)/report-auto/index.html)"

bench: install
	$(PY) bench/bench_placement.py
	$(PY) bench/bench_run.py
	$(PY) bench/bench_run.py --cpus 0 --no-startup
	$(PY) bench/bench_stream.py
	$(PY) bench/bench_study.py
	$(PY) bench/bench_candidates.py
	$(PY) bench/bench_autopin.py
	$(PY) bench/bench_matching.py
	$(PY) bench/bench_mapping.py
	$(PY) bench/bench_published.py
	$(PY) bench/bench_trace.py
	$(PY) bench/bench_calibrate.py
	$(PY) bench/bench_memory.py
	$(PY) bench/bench_tune.py
	$(PY) bench/bench_doctor.py

# The manual (docs/, MkDocs Material) into site/; --strict: a broken link or anchor fails the build.
docs: install
	$(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build dist $(DEMO_DIR)
