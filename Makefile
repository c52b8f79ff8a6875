# pinlab: `make demo` and `make test` work on a fresh machine (they run `make install` first).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.pinlab-installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find src native -type f -not -name '*.pyc' 2>/dev/null)
DEMO_DIR ?= demo-output

.PHONY: install system-packages test demo bench clean

install: system-packages $(STAMP)

# Debian packages pinlab needs (hwloc, numactl, likwid, LLVM OpenMP, qemu for the NUMA VM tests).
# Installs what is missing when run as root; otherwise says what to install. Quick when all is there.
system-packages:
	@tools/install-system-packages.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) $(SOURCES)
	$(PY) -m pip install -q "scikit-build-core>=0.8" "cmake>=3.18" ninja
	$(PY) -m pip install -q --no-build-isolation ".[test]"
	@touch $(STAMP)

test: install
	$(PY) -m pytest -q

demo: install
	@mkdir -p $(DEMO_DIR)
	$(VENV)/bin/pinlab topology
	@n=$$($(VENV)/bin/pinlab topology -f json | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["summary"]["cores"])'); \
	for s in compact scatter; do \
		echo "== $$s, $$n threads on this machine"; \
		$(VENV)/bin/pinlab place -s $$s -n $$n --picture $(DEMO_DIR)/this-$$s.svg || exit 1; \
		echo "== $$s, 4 threads on the bundled clovertown (2 sockets x 2 L2 pairs), as OpenMP variables"; \
		$(VENV)/bin/pinlab place -t clovertown -s $$s -n 4 -f omp --picture $(DEMO_DIR)/clovertown-$$s.png || exit 1; \
	done
	@echo "pictures: $$(ls $(DEMO_DIR)/*.svg $(DEMO_DIR)/*.png | tr '\n' ' ')"
	@n=$$($(VENV)/bin/pinlab topology -f json | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["summary"]["cores"])'); \
	echo "== STREAM with $$n threads, unpinned, then pinned with scatter (record in $(DEMO_DIR)/stream-scatter.json)"; \
	$(VENV)/bin/pinlab workload run stream -n $$n -- --size 20M --ntimes 5 | grep -E "^(Kernel|triad)" && \
	$(VENV)/bin/pinlab run -s scatter -n $$n --record $(DEMO_DIR)/stream-scatter.json -- $$($(VENV)/bin/pinlab workload path stream) --size 20M --ntimes 5 | grep -E "^(Kernel|triad)"

bench: install
	$(PY) bench/bench_placement.py
	$(PY) bench/bench_run.py
	$(PY) bench/bench_run.py --cpus 0 --no-startup
	$(PY) bench/bench_stream.py

clean:
	rm -rf $(VENV) build $(DEMO_DIR)
