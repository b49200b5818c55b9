#!/usr/bin/env bash
# What pre-training is worth, on a lent GPU (issue 25, item 5): bench/pretraining_value.py's
# protocol at 10x or more the CPU run's compute, ELMo against Masked ELMo in the released small
# shapes (stream batches, bfloat16, Adam), on the same real-text corpus and probe tasks.
#
# On the development machine, from the project root, after the README's test install:
#   bash bench/gpu_pretraining_value.sh
# packs TensorFlow (../shared/gpu/prepare.sh: .gpu/c0 .. .gpu/cN) and the prepared data
# (.gpu/data: the corpus is for personal use, so it travels as an ignored folder and is never
# committed), then prints the device commands: the chunk commands, back to back, then one
# command per model (each under 10 minutes of device time; about 25 in all). Each writes
# $OUT/pretraining_value-gpu.json (merge: python bench/pretraining_value.py --output FILE
# reads what is there). Budgets: 4 and 8 minutes of an H100 in bfloat16 are about 10 and 20
# times the CPU run's 30 minutes of compute (2.4k tokens/s on 2 cores against ~100k).
set -euo pipefail
[ -x .venv/bin/python ] || { echo "run from the project root after the README's install" >&2; exit 1; }
bash ../shared/gpu/prepare.sh
.venv/bin/python bench/real_text.py --data-dir .gpu/data/real_text > /dev/null
rm -rf .gpu/data/real_text/corpora   # the prepared files are enough; keep the carry small
du -sh .gpu/data
COMMON="bash /tmp/asm/device_setup.sh >/dev/null && . /tmp/asm/env.sh && python3 bench/pretraining_value.py --data-dir .gpu/data/real_text --runs /tmp/pv --output \$OUT/pretraining_value-gpu.json --mixed-precision bfloat16 --calibration-steps 300 --budgets 4 8 --seeds 0"
echo "Then, carrying .gpu/data, one command per model:"
for model in elmo_small masked_elmo_small; do
  echo "  $COMMON --models $model"
done
