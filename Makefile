# The README's commands. Everything installs into .venv; nothing needs network beyond the
# package registries, and nothing downloads model weights.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
export NO_ALBUMENTATIONS_UPDATE := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test ui install bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
# ray: the Ray executor's tests run in `make test`. setuptools' "Editable installation" note (folders named like the
# package may shadow it: none here, the package's folder is backend/) is silenced so that a fresh install prints no
# packaging warning: pip >= 25 shows build-backend warnings even with --quiet
	PYTHONWARNINGS='ignore:Editable installation' $(PIP) install --quiet -e '.[test,ray]'
	# frost's reference photographs (data files only: --no-deps keeps its opencv-python and scikit-image out)
	$(PIP) install --quiet --no-deps 'imagecorruptions==1.1.2'
	touch $@

install: $(VENV)/.installed

# its own wall time split into install and demo (the install is a recursive make so that it can be timed)
demo:  ## plan a domain offline and evaluate both embedded models on the bundled sample
	@t0=$$(date +%s); $(MAKE) --no-print-directory install && echo $$(( $$(date +%s) - t0 )) > $(VENV)/.install-seconds
	@t1=$$(date +%s); $(VENV)/bin/domainbench demo && \
	  echo "make demo: install $$(cat $(VENV)/.install-seconds) s, demo $$(( $$(date +%s) - t1 )) s"

test: install  ## the whole test suite, offline, on CPU
	$(PY) -m pytest -q

ui: install  ## the browser UI on http://localhost:8501
	$(VENV)/bin/domainbench ui

bench: install  ## speed and memory measurements (ratios against in-run references)
	for b in benchmarks/*.py; do $(PY) $$b --quick || exit 1; done

clean:
	rm -rf $(VENV) .domainbench .pytest_cache
