# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint install messages clean bench-model

# uv installs in half pip's time; --compile-bytecode writes the .pyc files pip would (under
# PYTHONDONTWRITEBYTECODE every test process would otherwise compile Django, Celery and the rest again).
# uv trusts the system's certificates (a proxy's own CA) but reads no pip.conf: where it cannot install
# (an index or wheel folder only pip is told about), pip does.
$(STAMP): pyproject.toml compression/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade uv
	UV_SYSTEM_CERTS=1 $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ./compression -e '.[test]' \
	  || $(BIN)/pip install --quiet -e ./compression -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## run: the console with a worker, SQLite and the filesystem broker (no Redis, no API key), demo data loaded
run: $(STAMP)
	scripts/run.sh

# what the tests need besides the venv: Debian packages (Chromium, gettext, ...) and the compiled translations
prepare-tests: $(STAMP)
	scripts/system-deps.sh
	$(BIN)/python manage.py compilemessages -l zh_Hans --ignore=.venv -v0

## test: lint, the whole suite with mypy beside it (CI=true: against PostgreSQL and Redis on 127.0.0.1)
test: prepare-tests
	scripts/test.sh

.PHONY: test-fast golden screenshots prepare-tests

## test-fast: the edit loop: the suite without browser, real-worker and fault tests, no lint
test-fast: $(STAMP)
	$(BIN)/python manage.py compilemessages -l zh_Hans --ignore=.venv -v0
	scripts/test.sh --fast

## screenshots: the browser tests, saving a screenshot of each page they visit in artifacts/screenshots/
screenshots: prepare-tests
	SCREENSHOTS=1 $(BIN)/pytest -n auto --dist worksteal -m browser

## golden: rewrite the pipeline's expected-output files (tests/compression/golden/expected/); review the diff
golden: $(STAMP)
	$(BIN)/python -m tests.compression.golden.regen

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## messages: refresh and compile the Chinese translations (needs gettext)
messages: $(STAMP)
	$(BIN)/python manage.py makemessages -l zh_Hans --ignore=.venv --ignore=tests --ignore=bench
	$(BIN)/python manage.py compilemessages -l zh_Hans --ignore=.venv

## bench-drift: drift detection on the labelled evaluation set (bench/data/drift_eval/; ARGS="--split heldout -v")
.PHONY: bench-drift
bench-drift: $(STAMP)
	$(BIN)/python bench/drift_eval.py $(ARGS)

## bench-model: a real local model in the loop (llama-cpp-python + Qwen2.5-Coder GGUF, cached; slow, not in `make test`)
bench-model: $(STAMP)
	$(BIN)/python bench/model.py $(ARGS)

clean:
	rm -rf var artifacts staticfiles
