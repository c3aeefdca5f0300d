# The two set-up commands: `make run` and `make test`. Each does all set-up on a fresh
# Debian machine (virtualenv, Python packages with torch pinned, Graphviz's dot, and for
# tests Chromium and Firefox ESR), and a second call reinstalls nothing.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
HOST ?= 127.0.0.1
PORT ?= 8501
PYTEST_ARGS ?=
# The viewer's browser bundle: npm packages from the lockfile, bundled by esbuild (graphviz_app/viewer).
VIEWER := graphviz_app/viewer
VIEWER_DEPS := $(VIEWER)/node_modules/.package-lock.json
BUNDLE := $(VIEWER)/dist/viewer.js

.PHONY: run test lint setup dot chromium firefox examples bench clean viewer

run: setup
	$(PY) -m graphviz_app.cli serve --host $(HOST) --port $(PORT)

examples: setup
	@mkdir -p out; for f in examples/*.py; do $(PY) $$f --out out || exit 1; done; echo "Rendered the examples into out/"

test: setup chromium firefox lint
	cd $(VIEWER) && npm test --silent
	$(PY) -m pytest $(PYTEST_ARGS)

# Lint and types (rules in pyproject.toml; the viewer's JavaScript: ESLint and tsc, in its package.json), before the tests.
lint: setup
	$(VENV)/bin/ruff check .
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict  # the manual (docs/, mkdocs.yml); never --quiet: it hides the warnings strict counts
	$(VENV)/bin/mypy
	cd $(VIEWER) && npm run --silent lint && npm run --silent typecheck

bench: setup
	$(PY) benchmarks/run_all.py

setup: $(STAMP) dot viewer

viewer: $(BUNDLE)

# npm ci installs exactly the lockfile; it runs again only when the lockfile changes.
$(VIEWER_DEPS): $(VIEWER)/package.json $(VIEWER)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Node.js and npm with apt-get for the viewer's bundle..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	  else \
	    echo "npm is not on PATH: install Node.js 18 or later (Debian: apt-get install nodejs npm), then run make again"; \
	    exit 1; \
	  fi; }
	cd $(VIEWER) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(BUNDLE): $(VIEWER_DEPS) $(VIEWER)/build.mjs $(wildcard $(VIEWER)/src/*)
	cd $(VIEWER) && npm run --silent build

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[web,dev,layout]'
	@touch $@

# Graphviz's `dot`: installed with apt-get when missing and we are root, else say how.
dot:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Graphviz (dot) with apt-get..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; \
	  else \
	    echo "Graphviz's 'dot' is not on PATH. Install it, then run make again:"; \
	    echo "  Debian/Ubuntu: sudo apt-get install graphviz"; \
	    echo "  macOS:         brew install graphviz"; \
	    echo "  conda:         conda install -c conda-forge graphviz"; \
	    exit 1; \
	  fi; }

# Debian's Chromium for the browser tests (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Chromium with apt-get for the browser tests..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; \
	  else \
	    echo "chromium is not installed: browser tests will be skipped (sudo apt-get install chromium)."; \
	  fi; }

# Debian's Firefox ESR for the viewer file's Firefox tests: driven over its built-in WebDriver
# BiDi (--remote-debugging-port), so no geckodriver and no downloaded browser build.
firefox:
	@command -v firefox-esr >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Firefox ESR with apt-get for the browser tests..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq firefox-esr >/dev/null; \
	  else \
	    echo "firefox-esr is not installed: the Firefox tests will be skipped (sudo apt-get install firefox-esr)."; \
	  fi; }

clean:
	rm -rf $(VENV) out build *.egg-info $(VIEWER)/node_modules $(VIEWER)/dist
