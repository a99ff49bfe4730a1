#!/usr/bin/env bash
# The default test suite N times in a row next to a CPU hog on every core (issue: tests must pass on a
# loaded machine). Usage: benchmarks/under_load.sh [N] [pytest args...]   (from the repository root)
# Prints one line per run and exits non-zero if any run failed. The hogs stop with the script.
set -u
runs=${1:-3}; shift || true
python=${PYTHON:-.venv/bin/python}
hogs=()
for _ in $(seq "$(nproc)"); do
  timeout 7200 "$python" -c "while True: pass" & hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
failed=0
for k in $(seq "$runs"); do
  start=$(date +%s)
  if HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 "$python" -m pytest -q -p no:cacheprovider "$@" > "/tmp/under_load_$k.log" 2>&1; then
    status=passed
  else
    status=FAILED; failed=1
  fi
  echo "run $k: $status in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg): $(tail -n 1 "/tmp/under_load_$k.log")"
done
exit $failed
