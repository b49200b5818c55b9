#!/usr/bin/env bash
# What pre-training is worth, on a lent GPU (issue 25, item 5): bench/pretraining_value.py's
# protocol at more than 10x the CPU run's compute, ELMo against Masked ELMo in the released
# small shapes (stream batches, bfloat16, Adam, XLA), on the same real-text corpus and probe
# tasks.
#
# On the development machine, from the project root, after the README's test install:
#   bash bench/gpu_pretraining_value.sh
# packs TensorFlow (../shared/gpu/prepare.sh: .gpu/c0 .. .gpu/cN) and adds the prepared data
# to the last chunk (the corpus is for personal use: it travels in an ignored folder and is
# never committed), then prints the device commands: the chunk commands, back to back, then
# bench/gpu_pretraining_value_device.sh, which runs both models side by side in one command
# (each under the device tool's 10 minutes) and writes $OUT/pretraining_value-gpu.json.
# Measured on an H200 (2026-11-27, bench/results/pretraining_value-gpu.json): the 8 chunk
# commands ~40 s of device time with the machine's start; 2 GPU-minutes per model: both
# calibrations (200 steps, XLA's first compilation included) and trainings ~350 s, ELMo's
# evaluation and three probes ~170 s more. Masked ELMo's evaluation compiles every length
# bucket of its held-out sentences and outlasted a 10-minute command there (its probes, which
# now run beside it, ran in a second command then: the kept biLM stays under /tmp/pv on the
# warm machine; the second command printed below).
# Compute: 2 minutes of elmo_small at ~31 ms per step of 128 x 20 tokens (H200, bfloat16) is
# ~10 M tokens through a model of ~10x elmo_cpu's FLOPs per token, against elmo_cpu's ~4 M
# tokens in 30 CPU-minutes.
set -euo pipefail
[ -x .venv/bin/python ] || { echo "run from the project root after the README's install" >&2; exit 1; }
# prepare.sh downloads Python 3.12 wheels of the venv's packages; promise (tensorflow-datasets's)
# is an sdist only: build its wheel here, and keep it out of prepare.sh's download list.
mkdir -p /tmp/gpu-prepare/whl
.venv/bin/pip wheel -q --no-deps "$(.venv/bin/pip freeze | grep -i '^promise==')" -w /tmp/gpu-prepare/whl
# pytest-xdist and execnet (for `pytest -n`; prepare.sh leaves pytest* to the device image)
.venv/bin/pip download -q --no-deps --only-binary=:all: -d /tmp/gpu-prepare/whl \
    $(.venv/bin/pip freeze | grep -i -E '^(pytest-xdist|execnet)==')
shared=$(cd ../shared/gpu && pwd)
sed -e "s/|libclang|-e )'/|libclang|promise|-e )'/" \
    -e "s|^ROOT=\$(pwd); HERE=.*|ROOT=\$(pwd); HERE=$shared|" \
    ../shared/gpu/prepare.sh > /tmp/gpu-prepare.sh
bash /tmp/gpu-prepare.sh > /tmp/gpu-prepare.log
last=$(ls -d .gpu/c* | sort -V | tail -1)
mkdir -p "$last/data"
.venv/bin/python bench/real_text.py --data-dir "$last/data/real_text" > /dev/null
rm -rf "$last/data/real_text/corpora"   # the prepared files are enough; keep the carry small
grep '^  carry' /tmp/gpu-prepare.log | grep -v "carry $last:"  # the last chunk travels with the run
echo "Then (each model's three probes, if the first command's deadline stopped them, below):"
echo "  mkdir -p /tmp/asm && cp -r $last/* /tmp/asm/ && bash bench/gpu_pretraining_value_device.sh 2 0 572   (carry $last, timeout_s 600)"
echo "  . /tmp/asm/env.sh; for t in wsj_pos_tagging sentence_polarity uncertainty; do python3 bench/pretraining_value.py --data-dir /tmp/asm/data/real_text --runs /tmp/pv --budgets 2 --seeds 0 --fine-tuned-at --models masked_elmo_small --only probe --tasks \$t --output \$OUT/masked-\$t.json > \$OUT/masked-\$t.log 2>&1 & done; wait"
