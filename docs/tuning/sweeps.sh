#!/bin/sh
# The replay sweeps behind docs/tuning.md: each `pnpm replay compare` runs the same synthetic
# multi-turn workload (4 simulated engines, seed 0) once per configuration and writes an SVG
# (TTFT CDFs + engine hit rate against the oracle) here, and its table to <name>.txt.
# Run from the repository root: sh docs/tuning/sweeps.sh [name ...]   (all sweeps: ~5 min here)
set -e
cd "$(dirname "$0")/../.."
OUT=docs/tuning
# 3 minutes of session arrivals (the 4 engines ~80% busy under round-robin); overload variants add load.
BASE="--synthetic multi-turn --duration-s 180 --num-workers 4 --seed 0 --no-progress"
OVER="--session-rate 0.7"

sweep() {
  name=$1; shift
  case " $ONLY " in *" $name "*|"  ") ;; *) return 0 ;; esac
  echo "== $name"
  pnpm --reporter=silent replay compare "$@" --svg "$PWD/$OUT/$name.svg" > "$OUT/$name.txt"
  sed -i "s#$PWD/##" "$OUT/$name.txt"
  sed -n '/^config /,$p' "$OUT/$name.txt"
}
ONLY="$*"

sweep modes $BASE -c round-robin -c least-loaded -c "--router-mode kv" -c "--router-mode kv --no-router-kv-events"
sweep overlap-credit $BASE -c "--router-mode kv --router-kv-overlap-score-credit 1" \
  -c "--router-mode kv --router-kv-overlap-score-credit 0.5" -c "--router-mode kv --router-kv-overlap-score-credit 0"
sweep prefill-load-scale $BASE -c "--router-mode kv --router-prefill-load-scale 1" \
  -c "--router-mode kv --router-prefill-load-scale 0.25" -c "--router-mode kv --router-prefill-load-scale 4"
sweep temperature $BASE -c "--router-mode kv --router-temperature 0" -c "--router-mode kv --router-temperature 0.5" \
  -c "--router-mode kv --router-temperature 2"
sweep track-active-blocks $BASE $OVER -c "--router-mode kv" -c "--router-mode kv --no-router-track-active-blocks"
sweep busy-threshold $BASE $OVER -c "--router-mode kv" \
  -c "--router-mode kv --admission-control token-capacity --active-prefill-tokens-threshold-frac 12" \
  -c "--router-mode kv --admission-control token-capacity --active-prefill-tokens-threshold-frac 6"
sweep queue-policy $BASE $OVER -c "--router-mode kv --router-queue-threshold None" \
  -c "--router-mode kv --router-queue-threshold 6 --router-queue-policy fcfs" \
  -c "--router-mode kv --router-queue-threshold 6 --router-queue-policy lcfs" \
  -c "--router-mode kv --router-queue-threshold 6 --router-queue-policy wspt"
sweep prefill-load-scale-overload $BASE $OVER -c "--router-mode kv --router-prefill-load-scale 1" \
  -c "--router-mode kv --router-prefill-load-scale 4" -c "--router-mode kv --router-prefill-load-scale 16"
sweep stale-index $BASE --event-delay-ms 2000 -c "--router-mode kv" -c "--router-mode kv --router-predicted-ttl-secs 5" \
  -c "--router-mode kv --router-predicted-ttl-secs 30"
