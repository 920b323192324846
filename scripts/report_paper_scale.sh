#!/usr/bin/env bash
# A paper-scale page from run archives: the archives are imported into a fresh database (which
# registers the population shipped in policies/), in the order given (run 1, run 2, ...), then
# `sumo report` draws them. Seconds, not the hours their games took. The archives are written by
# `sumo runs export RUN --out docs/runs/NAME.json.gz` from the databases that played them (`sumo
# tournament --population 105 --physics fast --seed 2026`, `sumo evolve --generations 10 --physics fast
# --seed 2026`, each resumed across sittings).
# Usage: scripts/report_paper_scale.sh [OUT [ARCHIVE ...]]
#   no arguments: docs/paper-scale/, the first population's tournament and evolution (those present);
#   e.g. scripts/report_paper_scale.sh docs/paper-scale-3 docs/runs/tournament-paper-3.json.gz
set -euo pipefail
OUT=${1:-docs/paper-scale}
if [ $# -gt 1 ]; then
  ARCHIVES=("${@:2}")
  for archive in "${ARCHIVES[@]}"; do
    if [ ! -f "$archive" ]; then echo "no archive at $archive" >&2; exit 2; fi
  done
else
  ARCHIVES=(docs/runs/tournament-paper.json.gz docs/runs/evolution-paper.json.gz)
fi
DB=${DB:-/tmp/sumo-paper-scale.sqlite}
SUMO=${SUMO:-sumo}
rm -f "$DB"
mkdir -p "$OUT"
for archive in "${ARCHIVES[@]}"; do
  if [ -f "$archive" ]; then $SUMO --db "$DB" runs import "$archive"; fi
done
$SUMO --db "$DB" report --out "$OUT" --regenerate-with "scripts/report_paper_scale.sh${*:+ $*}"
