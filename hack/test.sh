#!/usr/bin/env bash
# test.sh runs every test of `make test` (and, with FEDBR_LONG=1, of `make test-long`) in five
# groups, each package's test binary linked once, and prints a table of the packages' times.
#
#   race: every package not named below, with the race detector, two packages at a time (-p 2;
#         the ones that start an API server share one per package, internal/testenv).
#   labunit: the lab's own packages whose tests exercise lab code (the kubelet and operator
#         doubles, control planes, the lab's commands): two at a time, without the race
#         detector. Where they call a fedbr library (internal/tidb's client, internal/warmup),
#         that library's own package runs it under the race detector. The lab packages that
#         exist to drive shipped clients or the engine in-process (the AWS, TiKV and PD doubles,
#         the EKS token double, labbr) stay in race.
#   serial: packages that run fedbr's engine in-process against clusters of doubles on real
#         timers (TTLs, leases, elections): the race detector on, one at a time.
#   lab:  packages that run the whole lab (four Kubernetes clusters of processes, fedbr-lab
#         built once) and nothing shipped in-process: one at a time, without the race detector
#         (the code under test runs in the lab's processes, built without it, as `make demo`).
#   image: hack/image's own module, without the race detector (it gzips a binary in one
#         goroutine, which -race slows several times over).
#
# Whatever runs without the race detector (fedbr and fedbr-lab, the lab packages, the image's
# static fedbr, make vet and make lint) compiles with the image's flags, CGO_ENABLED=0 and -trimpath, so
# a cold run compiles the dependency graph twice (with -race, and this way), not three times.
#
# Every group runs even when an earlier one failed; the script exits non-zero if any did. Each
# group's `go test -json` stream is kept in $TEST_OUT/<group>.json (default _output/test).
# Environment: the Makefile sets KUBEBUILDER_ASSETS, FEDBR_HELM, FEDBR_PROMTOOL; this script
# builds fedbr and fedbr-lab once into .cache/test-bin and names them in FEDBR_BIN and
# FEDBR_LAB_BIN (internal/testenv.Binary). FEDBR_SEED picks the long suites' slice (default: the
# day of the year), FEDBR_LONG=1 runs them whole. GOTEST_TIMEOUT bounds each package.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SERIAL_PKGS=(./test/chain ./test/protocol ./internal/lab/bank)
LAB_PKGS=(./test/e2e ./test/daytwo ./test/crash ./test/lab)
# Lab-only packages that stay under the race detector: their tests run shipped code in-process
# (internal/cloud/aws, ekstoken, br/pause and br/restoredata, internal/tidb's PD client).
LAB_RACE_PKGS=(./internal/lab/awsdouble/... ./internal/lab/eksauth ./internal/lab/tikvdouble ./internal/lab/pddouble ./internal/lab/labbr)
TEST_OUT="${TEST_OUT:-_output/test}"
TIMEOUT="${GOTEST_TIMEOUT:-30m}"

mkdir -p .cache/test-bin "$TEST_OUT"
rm -f "$TEST_OUT"/*.json
start=$SECONDS
# The binaries the tests run as processes, built once, as testenv.Binary would build them.
CGO_ENABLED=0 go build -trimpath -o .cache/test-bin/ ./cmd/fedbr ./cmd/fedbr-lab ./hack/testjson
export FEDBR_BIN="$PWD/.cache/test-bin/fedbr" FEDBR_LAB_BIN="$PWD/.cache/test-bin/fedbr-lab"
echo "test: binaries built in $((SECONDS - start))s"
if [[ "${FEDBR_LONG:-}" == 1 ]]; then
	echo "test: FEDBR_LONG=1: every part of the long suites"
else
	echo "test: long suites take the slice of seed ${FEDBR_SEED:-$(( 10#$(date -u +%j) )) (the day of the year)} (FEDBR_SEED=<n> picks another, make test-long runs all)"
fi

mapfile -t all < <(go list ./...)
skip=" $(go list "${SERIAL_PKGS[@]}" "${LAB_PKGS[@]}" | tr '\n' ' ') "
keep=" $(go list "${LAB_RACE_PKGS[@]}" | tr '\n' ' ') "
race=() labunit=()
for p in "${all[@]}"; do
	if [[ "$skip" == *" $p "* ]]; then
		continue
	elif [[ "$keep" != *" $p "* && "$p" =~ /internal/(lab|cmd/lab)(/|$) ]]; then
		labunit+=("$p")
	else
		race+=("$p")
	fi
done

rc=0
# group NAME DIR go-test-args...: runs go test -json in DIR, shows it through testjson.
group() {
	local name=$1 dir=$2 t=$SECONDS
	shift 2
	echo "test: group $name"
	# -ldflags=-w: test binaries without DWARF link in two thirds of the time (panics and race
	# reports print their stacks from the runtime's own tables all the same).
	(cd "$dir" && go test -json -count=1 -timeout "$TIMEOUT" -ldflags=-w "$@" 2>&1) |
		.cache/test-bin/testjson filter --out "$TEST_OUT/$name.json" || rc=1
	echo "test: group $name took $((SECONDS - t))s"
}
group race . -race -p 2 "${race[@]}"
CGO_ENABLED=0 group labunit . -trimpath -p 2 "${labunit[@]}"
group serial . -race -p 1 "${SERIAL_PKGS[@]}"
CGO_ENABLED=0 group lab . -trimpath -p 1 "${LAB_PKGS[@]}"
CGO_ENABLED=0 group image hack/image -trimpath ./...

echo
echo "test: packages by time (go test -json in $TEST_OUT):"
.cache/test-bin/testjson table "$TEST_OUT"/*.json
echo "test: all groups took $((SECONDS - start))s; $([[ $rc == 0 ]] && echo PASS || echo FAIL)"
exit $rc
