#!/usr/bin/env bash
# Runs every fuzz target of the repository, one after another, each for
# SECONDS (default 60) with one worker, and prints a table: target, package,
# time fuzzed, wall seconds (with the instrumented build), executions, new
# interesting inputs, result. A target that fails leaves its
# input in <pkg>/testdata/fuzz/<Target>/ (commit it with the fix, as a
# regression seed that plain go test then runs); the script exits 1 when any
# target failed. The executions are the go command's last count: its
# progress lines can stall at a count while the worker goes on
# (golang/go#51484), and what it had not collected when the time was up is
# left out, so a count that stalled is a lower bound. Go fails a target
# whose single input runs over 10 s.
#
#   scripts/fuzz.sh [SECONDS]
#
# Environment: PARALLEL (workers per target, default 1), PKGS (the packages
# to search, default ./...), GOFLAGS as for go test. The targets are found
# with go test -list, so a new Fuzz function joins the campaign by itself.
set -euo pipefail

secs=${1:-60}
if ! [[ $secs =~ ^[0-9]+$ ]] || ((secs < 1)); then
	echo "usage: scripts/fuzz.sh [SECONDS]  (SECONDS: a whole number ≥ 1, got '$secs')" >&2
	exit 2
fi
parallel=${PARALLEL:-1}
cd "$(dirname "$0")/.."
export GOEXPERIMENT=${GOEXPERIMENT:-simd}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# Every package with a fuzz target, and its targets.
targets=()
for pkg in $(go list ${PKGS:-./...}); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
	for name in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		targets+=("$pkg $name")
	done
done
if ((${#targets[@]} == 0)); then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi

failed=0
rows=()
for entry in "${targets[@]}"; do
	read -r pkg name <<<"$entry"
	log="$logs/$name.log"
	echo "fuzzing $pkg $name for ${secs}s" >&2
	start=$(date +%s)
	status=ok
	if ! go test -run '^$' -fuzz "^$name\$" -fuzztime "${secs}s" -parallel "$parallel" "$pkg" >"$log" 2>&1; then
		status=FAIL
		failed=1
		grep -E 'Failing input written to|--- FAIL|panic:|fuzz_test.go:[0-9]+' "$log" | head -5 >&2 || true
	fi
	took=$(($(date +%s) - start))
	# The last progress line: "fuzz: elapsed: 1m0s, execs: 123 (2/sec), new interesting: 4 (total: 40)".
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
	elapsed=$(sed -nE 's/.*elapsed: ([0-9hms.]+),.*/\1/p' <<<"$last")
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	newi=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	rows+=("$(printf '%-28s %-12s %8s %6s %12s %8s  %s' "$name" "${pkg#github.com/hacrl/hacrl/}" "${elapsed:--}" "$took" "${execs:-0}" "${newi:-0}" "$status")")
done

printf '%-28s %-12s %8s %6s %12s %8s  %s\n' target package fuzzed wall executions new result
printf '%s\n' "${rows[@]}"
exit $failed
