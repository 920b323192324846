#!/usr/bin/env bash
# Regenerate docs/results/: the paper's game experiments at a small but readable size on the population
# shipped in policies/ (every database registers it), then `sumo report`. About 10-20 minutes on
# 2 cores. Usage: scripts/report_results.sh [DB] [OUT]   (defaults: a fresh /tmp/sumo-results.sqlite,
# docs/results). No locomotion agent ships: Fig. 3 is drawn on toy ones trained here for a minute each.
set -euo pipefail
DB=${1:-/tmp/sumo-results.sqlite}
OUT=${2:-docs/results}
SUMO=${SUMO:-sumo}
rm -f "$DB"
LSTMS=ant-lstm,bug-lstm,spider-lstm
$SUMO --db "$DB" tournament --population 105 --matches 150 --rounds 10 --episodes 3 --physics fast --seed 0
$SUMO --db "$DB" evolve --kinds mlp-none,lstm-none,lstm-track,lstm-meta,lstm-rl2 --copies 2 --generations 4 --matches 20 \
  --rounds 10 --episodes 3 --physics fast --seed 0
$SUMO --db "$DB" experiment adaptation --agents ant-meta,ant-lstm,ant-track,ant-rl2 \
  --opponents bug-lstm,spider-lstm --rounds 20 --episodes 3 --repeats 6 --physics fast --seed 0
$SUMO --db "$DB" experiment sample-complexity --agents ant-meta,ant-track --opponents bug-lstm \
  --episodes 1,3,9 --rounds 20 --repeats 4 --physics fast --seed 0
$SUMO --db "$DB" experiment calibration --agents $LSTMS --rounds 10 --episodes 3 --repeats 10 --physics fast --seed 0
for st in none track meta; do
  name=toy-loco-mlp$([ $st = none ] || echo "-$st")
  $SUMO --db "$DB" train --env locomotion --arch mlp --strategy $st --name $name --iterations 10 --envs 4 --horizon 50 \
    --hidden 32 --seed 0
done
$SUMO --db "$DB" eval locomotion toy-loco-mlp toy-loco-mlp-track toy-loco-mlp-meta --repeats 10 --seed 0
$SUMO --db "$DB" report --out "$OUT" --regenerate-with "scripts/report_results.sh${1:+ $1}${2:+ $2}"
