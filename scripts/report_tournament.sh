#!/usr/bin/env bash
# The paper-scale tournament's page (docs/tournament/) from its archive: the archive is
# imported into a fresh database (which registers the population shipped in policies/), then
# `sumo report` draws it. Seconds, not the hours its games took. The archive is written by
# `sumo runs export RUN --out docs/runs/tournament-paper.json.gz` from the database that
# played it (`sumo tournament --population 105 --physics fast --seed 2026`, resumed across sittings).
# Usage: scripts/report_tournament.sh [ARCHIVE] [OUT]
set -euo pipefail
ARCHIVE=${1:-docs/runs/tournament-paper.json.gz}
OUT=${2:-docs/tournament}
DB=${DB:-/tmp/sumo-tournament-paper.sqlite}
SUMO=${SUMO:-sumo}
rm -f "$DB"
mkdir -p "$OUT"
$SUMO --db "$DB" runs import "$ARCHIVE"
$SUMO --db "$DB" report --out "$OUT" --regenerate-with "scripts/report_tournament.sh${1:+ $1}${2:+ $2}"
