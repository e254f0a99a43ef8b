#!/bin/sh
# Prints the scale table of docs/performance.md ("What one more of each
# costs"): each row is a difference between two readings of the same run
# (with and without the thing counted), divided by how many were added.
# About two to four minutes on a 2-core machine; run it on an idle one.
#
#   sh docs/scale.sh [GROUPS [AGENTS [EVENTS]]]   (defaults 200 200 100000)
#
# GROUPS: Groups of the bench runs (internal/bench TestScaleGroups);
# AGENTS: agents connected to the authority (authority-lite TestScaleAuthority);
# EVENTS: the long log of the restart measurement (TestRestartTimeRatio).
set -eu
cd "$(dirname "$0")/.."
groups=${1:-200}
agents=${2:-200}
events=${3:-100000}
t() { go test -v -count=1 -timeout 10m "$@"; }

echo "| what | costs | measured as |"
echo "| --- | --- | --- |"
MWP_SCALE_GROUPS=$groups t -run '^TestScaleGroups$' ./internal/bench/ | grep '^|'
MWP_SCALE=$agents t -run '^TestScaleAuthority$' ./authority-lite/ | grep '^|'
t -run '^$' -bench 'QueuedItemMemory' -benchtime 1x ./scheduler/ |
	awk '/B\/queued-item/ { for (i = 1; i < NF; i++) if ($(i+1) == "B/queued-item") printf "| heap per queued item, scheduler | %.0f B | 10,000 items queued, against the scheduler before them |\n", $i }'
t -run '^$' -bench 'HeapPerItem' -benchtime 1x ./queue/ |
	awk '/heap-B\/item/ { for (i = 1; i < NF; i++) if ($(i+1) == "heap-B/item") printf "| heap per queued item, worker store | %.0f B | 100,000 WorkItems loaded by Open, against the store closed |\n", $i }'
MWP_RESTART_EVENTS=$events t -run '^TestRestartTimeRatio$' ./authority-lite/ |
	awk -v n="$events" '/ratio long\/short/ { sub(/.*ratio long\/short: /, ""); printf "| authority start-up, %d events against 10,000 | %s | the same active Groups, the rest archived (median of 11 restarts each) |\n", n, $0 }'
