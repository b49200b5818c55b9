#!/usr/bin/env bash
# On the lent GPU machine, after the chunk commands bench/gpu_pretraining_value.sh prints:
#   bash bench/gpu_pretraining_value_device.sh [BUDGET_MINUTES=2] [SEED=0] [DEADLINE_SECONDS=540] [STAGE=all]
# bench/pretraining_value.py's protocol for the small shapes, fitted to one device command:
# elmo_small and masked_elmo_small_cloze (the chosen Masked ELMo) trained side by side on the
# one GPU, then, as soon as a model's biLM is kept, its held-out evaluation and its three
# frozen probes at once (Masked ELMo's evaluation compiles every length bucket of the held-out
# sentences: minutes on a GPU).
# The steps: by default those the sixth lending's calibrations give the budget
# (CALIBRATION_FROM, bench/pretraining_value.py's --calibration-from; each model's step time
# was measured there while the other calibrated too, an approximation of equal shares), so
# that every lending trains the same steps and its seed compares with the others', and no
# calibration spends the lending's minutes. CALIBRATION_FROM= measures anew, side by side
# (CALIBRATION_STEPS steps, default 200).
# MODELS="a b" runs other models of the protocol (with the default CALIBRATION_FROM only those
# that report calibrated: elmo_small and masked_elmo_small_cloze; others need CALIBRATION_FROM=).
# At the deadline what still runs of this script's processes is stopped and listed; every
# finished part is in $OUT/pretraining_value-gpu.json (the per-process reports merged,
# `stopped_at_deadline` and `failed` naming what is missing), with each model's log and
# nvidia-smi's line beside it (6 files for two models; the device tool brings back 8).
# STAGE=probes, on the same warm machine after a command the deadline stopped: the probes
# again, all at once (each anew; those already reported are skipped; not the held-out
# evaluation), with the same merged report. Give it a DEADLINE_SECONDS that ends well inside
# the device time left: a command the device tool stops at its own limit returns no report.
set -uo pipefail
export LC_ALL=C
budget=${1:-2}; seed=${2:-0}; deadline=${3:-540}; stage=${4:-all}
case $stage in all|probes) ;; *) echo "STAGE is all or probes, not '$stage'" >&2; exit 2;; esac
began=$(date +%s)
out=${OUT:-/tmp/pv-out}; mkdir -p "$out"
if [ "$stage" = all ]; then
  rm -rf /tmp/pv && mkdir -p /tmp/pv  # a rerun starts anew
  bash /tmp/asm/device_setup.sh > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; exit 1; }
elif [ ! -d /tmp/pv ]; then
  echo "STAGE=probes needs the kept biLMs of a command before on this machine (/tmp/pv)" >&2
  exit 2
fi
rm -f /tmp/pv/stopped.txt /tmp/pv/failed.txt
. /tmp/asm/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/nvidia-smi.txt"
common=(--data-dir /tmp/asm/data/real_text --runs /tmp/pv --budgets "$budget" --seeds "$seed")
calibration_from=${CALIBRATION_FROM-bench/results/pretraining_value-gpu-issue38-lending6.json}
pretraining=(--mixed-precision bfloat16)
if [ -n "$calibration_from" ]; then
  pretraining+=(--calibration-from "$calibration_from")
else
  pretraining+=(--calibration-steps "${CALIBRATION_STEPS:-200}")
fi

model() {  # pre-train; once its biLM is kept (renamed into place whole), its held-out
           # evaluation and its three frozen probes at once, a report per process
  local name=$1 kept=/tmp/pv/$1/seed-$seed/budget-$(printf %g "$budget") pids=() failed=0
  local pretrain=
  if [ "$stage" = all ]; then
    python3 bench/pretraining_value.py "${common[@]}" "${pretraining[@]}" --models "$name" \
        --only pretrain --output "/tmp/pv/$name.json" &
    pretrain=$!
    while kill -0 "$pretrain" 2> /dev/null && [ ! -f "$kept/run.json" ]; do sleep 2; done
  fi
  if [ ! -f "$kept/run.json" ]; then
    echo "$name: no kept biLM at $kept, so no probes"
  else
    for task in wsj_pos_tagging sentence_polarity uncertainty; do
      python3 bench/pretraining_value.py "${common[@]}" --models "$name" --only probe \
          --tasks "$task" --fine-tuned-at --output "/tmp/pv/$name-$task.json" \
          > "/tmp/pv/$name-$task.log" 2>&1 &
      pids+=("$!")
    done
  fi
  [ -z "$pretrain" ] || wait "$pretrain" || failed=1
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  cat /tmp/pv/"$name"-*.log 2> /dev/null
  return "$failed"
}

for name in ${MODELS:-elmo_small masked_elmo_small_cloze}; do
  { model "$name" > "$out/$name.log" 2>&1 || echo "$name" >> /tmp/pv/failed.txt; } &
done
while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - began )) -lt "$deadline" ]; do sleep 5; done
descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }
stopped=$(descendants $$)
for pid in $stopped; do ps -o args= -p "$pid"; done | grep python > /tmp/pv/stopped.txt
kill $stopped 2> /dev/null  # what still runs of this script's own processes
tail -n 20 /tmp/pv/*-*.log > "$out/probes.log" 2>&1  # the probes' ends, stopped or not
python3 - "$out/pretraining_value-gpu.json" /tmp/pv/*.json <<'PY'
import json
import os
import sys


def merge(into, other):
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into.setdefault(key, value)


report = {"runs_of_parts": {}}
for path in sys.argv[2:]:
    with open(path) as f:
        part = json.load(f)
    report["runs_of_parts"][os.path.basename(path)] = part.pop("runs_of_parts", {})
    merge(report, part)
for key, path in (("stopped_at_deadline", "/tmp/pv/stopped.txt"),
                  ("failed", "/tmp/pv/failed.txt")):
    lines = open(path).read().split("\n") if os.path.exists(path) else []
    report[key] = [x for x in lines if x]
with open(sys.argv[1], "w") as f:
    json.dump(report, f, indent=2)
print(json.dumps({k: report.get(k) for k in ("pretraining", "probes", "stopped_at_deadline",
                                              "failed")}, indent=1))
PY
echo "wall $(( $(date +%s) - began )) s"
