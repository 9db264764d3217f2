# The two commands of the README: `make demo` and `make test`. Both install what
# they need first; a warm second run only checks stamps and caches.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed

.PHONY: all setup constraints audit provision provision-nodes provision-monitoring images up down status lint typecheck test test-unit test-integration test-e2e test-long test-node test-monitoring test-hostile demo demo-alerts demo-agent soak bench bench-executors bench-pubsub bench-state bench-handover bench-failover bench-cold-start bench-operator clean

all: test

# Python environment: every third-party distribution from constraints.txt, checked
# against its hashes (--require-hashes: a distribution without a matching hash is
# refused, naming it; pyspark, an sdist, is built by the hashed build-constraints.txt);
# then the repository's own four, editable and without dependencies, built by the
# hashed build-constraints.txt too; then a check that nothing
# they need is missing (a dependency added to a pyproject.toml without `make
# constraints`). uv itself comes from requirements-uv.txt, by hash too.
BUILD_HASHES := --build-constraints build-constraints.txt --require-build-hashes
$(STAMP): pyproject.toml api/pyproject.toml job/pyproject.toml operator/pyproject.toml \
		constraints.txt build-constraints.txt requirements-uv.txt
	@bash stack/scripts/check-prereqs.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps \
		-r requirements-uv.txt
	@# The one distribution of the repository before it was split in three.
	@$(BIN)/uv pip uninstall -q --python $(BIN)/python sluice 2>/dev/null || true
	$(BIN)/uv pip install -q --python $(BIN)/python --require-hashes $(BUILD_HASHES) \
		-r constraints.txt
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps $(BUILD_HASHES) \
		-e ./api -e ./job -e ./operator -e .
	@$(BIN)/uv pip check -q --python $(BIN)/python
	@touch $@

setup: $(STAMP)

# The pins, regenerated with their hashes: constraints.txt (the development
# environment: the four distributions, every extra), job/requirements.txt and
# operator/requirements.txt (what each image installs: the same pins and hashes, a
# subset), build-constraints.txt (the build backends: the repository's packages' and
# what it needs for editable installs, and the example transform's for `sluice-dev
# image build`)
# and requirements-uv.txt (uv). Pins already in a file are kept (uv prefers the
# versions of the file it writes); to move one, `make constraints
# UPGRADE='--upgrade-package NAME'`. Needs the package index, not the environment.
UPGRADE ?=
OWN := --no-emit-package sluice-api --no-emit-package sluice-job \
	--no-emit-package sluice-operator --no-emit-package sluice-dev
COMPILE = $(BIN)/uv pip compile -q --python-version 3.11 --generate-hashes \
	--custom-compile-command 'make constraints' $(UPGRADE)
constraints:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/python -m pip install -q --disable-pip-version-check \
		--require-hashes --no-deps -r requirements-uv.txt
	printf '%s\n' ./api ./job ./operator '.[dev,bench]' | $(COMPILE) - $(OWN) -o constraints.txt
	printf '%s\n' ./api ./job | $(COMPILE) - $(OWN) -c constraints.txt -o job/requirements.txt
	printf '%s\n' ./api ./operator | $(COMPILE) - $(OWN) -c constraints.txt \
		-o operator/requirements.txt
	printf '%s\n' hatchling==1.27.0 editables setuptools | $(COMPILE) - -c constraints.txt \
		-o build-constraints.txt
	echo uv==$(UV_VERSION) | $(COMPILE) - -o requirements-uv.txt

# Known vulnerabilities in the pinned packages (not part of `make test`: it asks the
# network): every pin of constraints.txt through pip-audit, findings printed as
# package, version, id, fixed in; exits non-zero on any finding not listed with a
# reason in audit-ignore.toml, and on any package that could not be audited.
audit: setup
	$(BIN)/python -m sluice_dev.vulnaudit --requirements constraints.txt --ignore audit-ignore.toml

# Servers and tools from Maven Central and the Go module proxy, cached by version.
provision: setup
	$(BIN)/sluice-dev provision

# Everything of provision, and the real nodes' binaries (kubelet, kube-proxy, pause,
# CoreDNS): built here, on the machine's network, since the stack's network namespace
# where the workers start reaches no module proxy.
provision-nodes: setup
	$(BIN)/sluice-dev provision --real-nodes

# Everything of provision, and what `sluice-dev up monitoring` runs: the Prometheus
# Operator (and its CRDs), Prometheus and Alertmanager, three long Go builds that
# make test does not need (its tests of them are left out: make test-monitoring).
provision-monitoring: setup
	$(BIN)/sluice-dev provision --monitoring

# The two images, Dockerfile.job and Dockerfile.operator, built with podman on base
# images made from Debian's packages (no registry is reachable), cached by what goes
# into them: localhost/sluice/job:dev and localhost/sluice/operator:dev. Installs
# podman, buildah, runc and mmdebstrap from Debian when missing (needs root).
images: setup
	$(BIN)/sluice-dev images

up: provision
	$(BIN)/sluice-dev up

# `make down` stops the stack and, when `make demo` made one, the demo's stack too.
down:
	$(BIN)/sluice-dev down
	@if [ -d $(DEMO_STACK) ]; then $(DEMO_ENV) $(BIN)/sluice-dev down; fi

status:
	$(BIN)/sluice-dev status

lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

# The whole suite, timed: pytest's summary ends with the wall clock of `make test` and
# its parts (setup and provisioning, lint and typecheck, the tests), and the slowest
# tests (--durations), so a growing suite shows where its time goes. It leaves out the
# long tests (`make test-long`).
PYTEST_ARGS ?= --durations=30
test:
	@started=$$(date +%s); \
	$(MAKE) --no-print-directory -j2 provision images || exit $$?; \
	provisioned=$$(date +%s); \
	$(MAKE) --no-print-directory lint typecheck || exit $$?; \
	linted=$$(date +%s); \
	SLUICE_TEST_STARTED=$$started \
	SLUICE_TEST_PROVISION_SECONDS=$$((provisioned - started)) \
	SLUICE_TEST_LINT_SECONDS=$$((linted - provisioned)) \
	$(BIN)/pytest -m "not long and not realnode and not monitoring" $(PYTEST_ARGS)

test-unit: setup
	$(BIN)/pytest -m unit

test-integration: provision images
	$(BIN)/pytest -m "integration and not realnode and not monitoring"

# The stack's monitoring with the chart's monitors and rules (sluice-dev up
# monitoring): the Prometheus Operator's configuration loaded by Prometheus, the
# operator and a driver scraped, the alerts loaded, Alertmanager reached; every
# shipped alert fired and resolved on a real fault (tests/e2e/test_alerts.py, about
# 30 minutes), tenancy and the sample limit in the real scrape. make test leaves
# these out (CI has no time for the builds).
test-monitoring: provision-monitoring
	$(BIN)/pytest -m monitoring -s

# Pods on real nodes: the pinned kubelet with containerd and runc, two workers in
# network namespaces of the stack's own (sluice_dev.realnode). The session runs in
# the stack's namespace (SLUICE_NETNS=1), so it uses a stack directory of its own;
# the images its tests build FROM the job image are built first, out here, where the
# package index is reachable (the custom-transform example fetches its build backend).
test-node: provision-nodes images
	$(BIN)/python -m tests.support.real_images
	SLUICE_NETNS=1 SLUICE_STACK_DIR=$(CURDIR)/.stack-node $(BIN)/pytest -m realnode -s

test-e2e: provision
	$(BIN)/pytest -m "e2e and not monitoring"

# The long tests `make test` leaves out to stay within CI's time (listed with their
# cost in tests/conftest.py, LONG; their faults are also in shorter tests of the
# suite): five e2e scenarios (executors, hot standby, warm handover, a partition, the
# upgrade with the operator killed: 19 of the e2e suite's 30 minutes here) and six
# integration tests; then the crash test with its former eight kills (make test: five).
test-long: provision images
	$(BIN)/pytest -m "long and not realnode"
	SLUICE_CRASH_KILLS=8 $(BIN)/pytest tests/integration/test_driver_crashes.py

# The hostile-tenant suite (docs/security.md), with its measured times.
test-hostile: provision
	$(BIN)/pytest -m hostile -s

# The demo on real nodes: the job image built from Dockerfile.job runs in containers
# under the pinned kubelet, with containerd and runc, in a stack of its own (its own
# directory and network namespace; needs root, as `make images` does).
# `make demo-agent` runs the same demo on the node agent, in the stack of `make up`.
DEMO_STACK := $(CURDIR)/.stack-demo
DEMO_ENV := SLUICE_NETNS=1 SLUICE_STACK_DIR=$(DEMO_STACK)
demo: provision-nodes images
	$(DEMO_ENV) $(BIN)/sluice-dev demo

# The same demo watched by the stack's Prometheus and Alertmanager (the chart's
# PodMonitor and PrometheusRule), with a Cassandra outage added: each fault's alerts,
# firing and resolving, as a timeline.
demo-alerts: provision-nodes provision-monitoring images
	$(DEMO_ENV) $(BIN)/sluice-dev demo --alerts

demo-agent: provision
	$(BIN)/sluice-dev demo

# The chaos soak of issue 12 (sluice-dev soak): 500,000 events from a transactional
# producer through 21 seeded faults and 2 upgrades, one line per fault, then the checks
# (missing, duplicates, aborted in sink, dlq missing, ...); exits non-zero on any.
# Once without a standby (clean-stop upgrades), then with a hot standby (warm-handover
# upgrades), and both compared per fault kind; SOAK_STANDBY=0 or 1 runs one.
SOAK_STANDBY ?= 0,1
soak: provision
	$(BIN)/sluice-dev soak --events 500000 --faults 21 --standby $(SOAK_STANDBY)

# The benchmark (bench/): Sluice's loop against Spark Structured Streaming, a Spark
# Real-Time Mode query and a standalone client's ceiling on the local Kafka and
# Cassandra (throughput, latency, a SIGKILL mid-run), left running afterwards.
# Three whole runs by default (BENCH_RUNS / --runs; --smoke: one), their medians in
# bench/results/<stamp>-summary.{json,md,png}. Options as flags, e.g.
# `make bench BENCH_ARGS=--smoke`, or BENCH_* variables (python -m bench -h).
# Then the executors run (bench-executors), the Pub/Sub run (bench-pubsub) and the
# cost of state (bench-state).
bench: provision
	$(BIN)/sluice-dev up kafka cassandra
	$(BIN)/python -m bench $(BENCH_ARGS)
	$(BIN)/python -m bench.executors $(BENCH_EXECUTORS_ARGS)
	$(BIN)/python -m bench.pubsub $(BENCH_PUBSUB_ARGS)
	$(BIN)/python -m bench.state $(BENCH_STATE_ARGS)

# What keyed state costs a batch: one backlog (20% re-sent) drained by the stateless
# KPI example, the de-duplicating one (keyed state), the unique-visitors one (a
# window state) and Structured Streaming's own state store doing the same
# (dropDuplicatesWithinWatermark, approx_count_distinct), each output checked,
# medians of three runs in
# bench/results/<stamp>-state.{json,md} (python -m bench.state -h).
bench-state: provision
	$(BIN)/sluice-dev up kafka cassandra
	$(BIN)/python -m bench.state $(BENCH_STATE_ARGS)

# Sluice with two executor pods beside local mode, both under the operator on the local
# control plane: exactness, start-up, backlog drain and the per-batch scheduling
# overhead, medians of three runs (--smoke or BENCH_SMOKE=1: one short run) in
# bench/results/<stamp>-executors.{json,md}.
bench-executors: provision
	$(BIN)/python -m bench.executors $(BENCH_EXECUTORS_ARGS)

# The Pub/Sub source on the stack's Pub/Sub server: the driver's pull -> commit -> ack
# rate beside a bare client's pull -> ack loop, and what deduplication costs per batch
# (spool, ids, lookups), medians of three runs in bench/results/<stamp>-pubsub.{json,md}.
bench-pubsub: provision
	$(BIN)/python -m bench.pubsub $(BENCH_PUBSUB_ARGS)

# The handover gap of an upgrade (last commit of the old driver -> first of the new),
# WarmHandover beside CleanStop in the same run, medians of 5 upgrades each, under
# steady production: bench/results/<stamp>-handover.{json,md}.
bench-handover: provision
	$(BIN)/python -m bench.handover $(BENCH_HANDOVER_ARGS)

# A killed driver -> the next commit with a hot standby (spec.standby: 1) beside without
# one, and the standby's memory and CPU (bench/failover.py; issue 20).
bench-failover: provision
	$(BIN)/python -m bench.failover $(BENCH_FAILOVER_ARGS)

# A cold driver's session start and first batch, with the class archive beside without
# it, in fresh JVMs, three pairs (bench/cold_start.py): bench/results/<stamp>-cold-start.*
bench-cold-start: provision
	$(BIN)/python -m bench.cold_start $(BENCH_COLD_START_ARGS)

# One operator, 100 pipelines with the stand-in driver on the local control plane.
bench-operator: provision
	$(BIN)/python -m bench.operator_scale $(BENCH_OPERATOR_ARGS)

clean: down
	rm -rf .stack

# The StreamingPipeline CRD, generated from the spec model, written to both of its
# committed places: crds/ (kubectl users) and charts/sluice/crds/ (Helm). A unit test
# fails when either is stale or they differ.
.PHONY: crds
crds: setup
	$(BIN)/python -m sluice_operator.crd --write
