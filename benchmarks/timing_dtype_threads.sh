#!/bin/sh
# Two real-model MARFT updates per (dtype, threads), one process each, run alone (docs/real-models.md).
# Needs the model cached (marft models fetch smollm2-135m-instruct); prints each update's time split.
set -e
OUT=${OUT:-benchmarks/results/learning}
mkdir -p "$OUT"
for cfg in "float32 1" "bfloat16 1" "bfloat16 2" "float32 2"; do
  set -- $cfg
  run=$(mktemp -d)
  /usr/bin/time -f "%e wall %U user %S sys" .venv/bin/marft train --no-progress model=smollm2-135m-instruct \
    env=marft/MathChain-v0 env_kwargs.profile=general-v0 env_kwargs.problems=synthetic:0 dtype=$1 threads=$2 \
    updates=2 episodes_per_update=16 max_new_tokens=48 eval_episodes=1 eval_every=0 eval_rounds=0 \
    run_dir="$run/run" > "$run/log.txt" 2>&1
  tail -1 "$run/log.txt"
  .venv/bin/python -c "
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(sys.argv[2], sys.argv[3], {k: round(v, 1) for k, v in d.items() if k.startswith('time/')})" "$run/run/metrics.jsonl" $1 $2
  rm -rf "$run"
done | tee "$OUT/timing_dtype_threads.txt"
