#!/usr/bin/env bash
# On the lent GPU machine, after the chunk commands bench/gpu_pretraining_value.sh prints:
#   bash bench/gpu_pretraining_value_device.sh [BUDGET_MINUTES=2] [SEED=0] [DEADLINE_SECONDS=540]
# bench/pretraining_value.py's protocol for the small shapes, fitted to one device command:
# elmo_small and masked_elmo_small side by side on the one GPU (their calibrations at the same
# time, so each model's steps come from its own step time under the same sharing; then their
# trainings), then, as soon as a model's biLM is kept, its held-out evaluation and its three
# frozen probes at once (Masked ELMo's evaluation compiles every length bucket of the held-out
# sentences, minutes on a GPU). MODELS="a b" runs other models of the protocol. At the deadline what
# still runs is stopped; every finished part is in $OUT/pretraining_value-gpu.json (the
# per-process reports merged), with each model's log and nvidia-smi's line beside it.
set -uo pipefail
budget=${1:-2}; seed=${2:-0}; deadline=${3:-540}
began=$(date +%s)
out=${OUT:-/tmp/pv-out}; mkdir -p "$out" /tmp/pv
bash /tmp/asm/device_setup.sh > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; exit 1; }
. /tmp/asm/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/nvidia-smi.txt"
common=(--data-dir /tmp/asm/data/real_text --runs /tmp/pv --budgets "$budget" --seeds "$seed"
        --mixed-precision bfloat16 --calibration-steps "${CALIBRATION_STEPS:-200}" --fine-tuned-at)

model() {  # pre-train; once its biLM is kept, its three frozen probes at once, beside its
           # held-out evaluation (a report per process)
  local name=$1 kept=/tmp/pv/$1/seed-$seed/budget-$(printf %g "$budget")
  python3 bench/pretraining_value.py "${common[@]}" --models "$name" --only pretrain \
      --output "/tmp/pv/$name.json" &
  local pretrain=$!
  while kill -0 "$pretrain" 2> /dev/null && [ ! -f "$kept/run.json" ]; do sleep 2; done
  [ -f "$kept/run.json" ] || { wait "$pretrain"; return 1; }  # copied last: the biLM is whole
  for task in wsj_pos_tagging sentence_polarity uncertainty; do
    python3 bench/pretraining_value.py "${common[@]}" --models "$name" --only probe \
        --tasks "$task" --output "/tmp/pv/$name-$task.json" > "/tmp/pv/$name-$task.log" 2>&1 &
  done
  wait
  cat /tmp/pv/"$name"-*.log
}

for name in ${MODELS:-elmo_small masked_elmo_small}; do
  model "$name" > "$out/$name.log" 2>&1 &
done
while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - began )) -lt "$deadline" ]; do sleep 5; done
descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }
kill $(descendants $$) 2> /dev/null  # what still runs of this script's own processes
tail -n 20 /tmp/pv/*-*.log > "$out/probes.log" 2>&1  # the probes' ends, stopped or not
python3 - "$out/pretraining_value-gpu.json" /tmp/pv/*.json <<'PY'
import json, sys


def merge(into, other):
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into.setdefault(key, value)


report = {}
for path in sys.argv[2:]:
    with open(path) as f:
        merge(report, json.load(f))
with open(sys.argv[1], "w") as f:
    json.dump(report, f, indent=1)
print(json.dumps({k: report.get(k) for k in ("calibration", "pretraining", "probes")}, indent=1))
PY
echo "wall $(( $(date +%s) - began )) s"
