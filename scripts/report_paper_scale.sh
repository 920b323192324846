#!/usr/bin/env bash
# The paper-scale runs' page (docs/paper-scale/) from their archives: the tournament's and the
# evolution's archives are imported into a fresh database (which registers the population shipped in
# policies/), in that order (run 1, run 2), then `sumo report` draws them. Seconds, not the hours their
# games took. The archives are written by `sumo runs export RUN --out docs/runs/NAME.json.gz` from the
# databases that played them (`sumo tournament --population 105 --physics fast --seed 2026`, and
# `sumo evolve --generations 10 --physics fast --seed 2026`, each resumed across sittings).
# Usage: scripts/report_paper_scale.sh [OUT]
set -euo pipefail
OUT=${1:-docs/paper-scale}
DB=${DB:-/tmp/sumo-paper-scale.sqlite}
SUMO=${SUMO:-sumo}
rm -f "$DB"
mkdir -p "$OUT"
for archive in docs/runs/tournament-paper.json.gz docs/runs/evolution-paper.json.gz; do
  if [ -f "$archive" ]; then $SUMO --db "$DB" runs import "$archive"; fi
done
$SUMO --db "$DB" report --out "$OUT" --regenerate-with "scripts/report_paper_scale.sh${1:+ $1}"
