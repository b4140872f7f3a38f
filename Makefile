# attnmt: `make train` runs the main job end to end; `make test` runs the tests.
# Extra Hydra overrides pass through ARGS, e.g. make train ARGS="attention=dot trainer.max_steps=1000"

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The shared corpus beside the checkout; no copy, just a config override.
CORPUS ?= ../shared/data/tatoeba-cmn-eng/cmn.txt
DATA_ARGS := data.raw_path=$(CORPUS)
ARGS ?=
# make best: its recipe (configs/experiment/; best_en_zh for en->zh) and where its two runs go
# (a run already there resumes from its last.pt).
EXPERIMENT ?= best
BEST ?= outputs/$(EXPERIMENT)
# The checkpoint make evaluate scores: the best of the newest run under outputs/.
CKPT ?= $(lastword $(sort $(wildcard outputs/*/*/best.pt)))

.PHONY: install data train best distill evaluate serve compare test lint format bench scale clean

install: $(VENV)/.installed

# torch is pinned so this machine takes its local CPU wheel instead of a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,align,cedict]'
	@# The fused C++ kernels of fp32 training (attnmt/model/native.py), compiled once with the C++
	@# compiler and ninja; where they cannot be, training runs the same loops in torch operations.
	@command -v ninja >/dev/null || $(BIN)/pip install --quiet ninja \
	  || echo "warning: could not install ninja"
	@PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m attnmt.model.native build \
	  || echo "warning: could not build the fused C++ kernels: fp32 training runs without them"
	@# A CJK font, so Chinese in attention heatmaps shows as characters, not boxes.
	@fc-list 2>/dev/null | grep -qi "CJK" || ( command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null ) \
	  || echo "warning: could not install fonts-noto-cjk: Chinese in heatmaps will show as boxes"
	@# Chromium and its driver, for the browser test of attnmt-serve's page (skipped without).
	@( command -v chromium && command -v chromedriver ) >/dev/null 2>&1 || ( command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null ) \
	  || echo "warning: could not install chromium and chromium-driver: the browser test will be skipped"
	touch $@

data: install
	$(BIN)/attnmt-prepare $(DATA_ARGS) $(ARGS)

# trainer.processes=auto: one process or two, whichever trains faster here (measured once).
train: install
	$(BIN)/attnmt-train $(DATA_ARGS) trainer.processes=auto $(ARGS)

# The strongest recipe measured (README, Results): two runs of +experiment=best that differ only
# in their seed, each averaged over its 5 best checkpoints, then decoded together as an ensemble.
best: install
	$(BIN)/attnmt-train $(DATA_ARGS) +experiment=$(EXPERIMENT) trainer.processes=auto trainer.seed=1234 hydra.run.dir=$(BEST)/seed1234 $(ARGS)
	$(BIN)/attnmt-train $(DATA_ARGS) +experiment=$(EXPERIMENT) trainer.processes=auto trainer.seed=2 hydra.run.dir=$(BEST)/seed2 $(ARGS)
	$(BIN)/attnmt-average run=$(BEST)/seed1234 output=$(BEST)/seed1234/avg.pt
	$(BIN)/attnmt-average run=$(BEST)/seed2 output=$(BEST)/seed2/avg.pt
	$(BIN)/attnmt-evaluate ckpt=[$(BEST)/seed1234/avg.pt,$(BEST)/seed2/avg.pt] sets=[dev,test]

# Sequence-level distillation (README): the teacher (TEACHER; default: make best's ensemble)
# translates its training split with beam 5 into $(DISTILL)/corpus, and a student of the default
# size (STUDENT: Luong's decoder without input feeding, the recipe's, named so that it stays)
# trains on that with make best's recipe for one seed (the default recipe keeping its 5 best
# checkpoints), is averaged like each of make best's runs, and is scored with beam 5 and greedy.
TEACHER ?= [$(BEST)/seed1234/avg.pt,$(BEST)/seed2/avg.pt]
DISTILL ?= outputs/distill
STUDENT ?= decoder=luong decoder.input_feeding=false
distill: install
	$(BIN)/attnmt-distill ckpt=$(TEACHER) output=$(DISTILL)/corpus
	$(BIN)/attnmt-train data=splits data.split_dir=$(DISTILL)/corpus $$(cat $(DISTILL)/corpus/langs) $(STUDENT) +experiment=best trainer.processes=auto hydra.run.dir=$(DISTILL)/student $(ARGS)
	$(BIN)/attnmt-average run=$(DISTILL)/student output=$(DISTILL)/student/avg.pt
	$(BIN)/attnmt-evaluate ckpt=$(DISTILL)/student/avg.pt sets=[dev,test]
	$(BIN)/attnmt-evaluate ckpt=$(DISTILL)/student/avg.pt sets=[test] beam_size=1 output_dir=$(DISTILL)/student/eval-greedy

evaluate: install
	@test -n "$(CKPT)" || { echo "no outputs/*/*/best.pt yet: run make train first, or pass CKPT=PATH"; exit 2; }
	$(BIN)/attnmt-evaluate ckpt=$(CKPT) sets=[dev,test] $(ARGS)

serve: install
	@test -n "$(CKPT)" || { echo "no outputs/*/*/best.pt yet: run make train first, or pass CKPT=PATH"; exit 2; }
	$(BIN)/attnmt-serve ckpt=$(CKPT) $(ARGS)

# The scorer study (scripts/compare.py): every attention option with the recipe's decoder, additive
# with Bahdanau's decoder, and guided alignment at W 0.5 and 1, each trained for the recipe's whole
# step budget (trainer.max_steps; --steps N) with early stopping off, seeds 1-3: many hours. Each
# finished run's figures go to the committed ledger docs/study/ledger/ (one JSON a run), and a run
# whose model is there is neither trained nor evaluated again; an interrupted run in
# compare/runs/VARIANT/seedN resumes. It ends with one verdict line per variant against additive.
# Options before the overrides, e.g. ARGS="--seeds 2 --variants additive dot bahdanau+dot".
compare: install
	$(BIN)/python scripts/compare.py $(DATA_ARGS) $(ARGS)

test: install
	$(BIN)/pytest -q $(ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python scripts/benchmark.py $(ARGS)

scale: install
	$(BIN)/python scripts/measure_scale.py $(ARGS)

clean:
	rm -rf $(VENV) outputs multirun data/processed
