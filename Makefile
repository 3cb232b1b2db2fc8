# Two entry points (see README): `make run` and `make test`. Both install everything they need.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install system-deps run test test-fast lint bench clean

install: $(VENV)/.installed

# setup.py compiles samsa/protocol/_recordcheck.c (the produce path's record validator) and
# samsa/net/_tlsrecord.c (the TLS listeners' record reader, built against OpenSSL's libcrypto:
# Debian's libssl-dev).
$(VENV)/.installed: pyproject.toml setup.py samsa/protocol/_recordcheck.c samsa/net/_tlsrecord.c
	@test -f /usr/include/openssl/evp.h || { $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq libssl-dev >/dev/null; }
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,spark,connectors]'
	touch $@

# kcat (Debian package) is one of the real clients the tests drive; PostgreSQL (Debian's server) is
# the real database the connector tests start in temp dirs.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@command -v kcat >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq kcat postgresql >/dev/null; }
	@# the console's browser tests (tests/browser): Debian's headless Chromium and its WebDriver
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get install -y -qq chromium chromium-driver >/dev/null; }

# The main job: the seeds' pipeline on the embedded default. A single-node Samsa (127.0.0.1:9092,
# ./samsa-data) starts with its schema registry; a generator produces Protobuf order events to
# order-events; a PySpark Structured Streaming job computes windowed revenue per product and writes
# it exactly once into the warehouse (DuckDB files in ./samsa-data/pipeline/) while a Kafka Connect
# worker's Snowflake-shaped sink lands the raw events; the walk-through checks both tables against
# the events. (`samsa demo` is the plain produce/consume walk-through.)
run: install
	$(VENV)/bin/samsa pipeline

# The suite runs on TEST_WORKERS pytest-xdist workers (most tests wait on sockets and timeouts, so
# more workers than cores pays); one test file is one unit (its module-scoped brokers start once),
# heaviest files first, and `serial` tests run alone: tests/parallel.py. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 4
XDIST = -n $(TEST_WORKERS) --dist loadfile

test: install system-deps
	$(VENV)/bin/pytest -q -ra $(XDIST)

test-fast: install
	$(VENV)/bin/pytest -q -ra $(XDIST) -m "not slow"

lint: install
	$(VENV)/bin/ruff check samsa tests bench
	$(VENV)/bin/mypy samsa

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) samsa-data samsa-data-checkpoints .pytest_cache
