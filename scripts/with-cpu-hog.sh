#!/usr/bin/env bash
# Run a command with every CPU core saturated by busy processes, then stop them (by their own pids).
#
#   scripts/with-cpu-hog.sh [-n N] CMD ARGS...
#
# N busy loops (default: the number of cores, `nproc`) run at the command's own priority for as long as the command
# does; the command's exit status is returned. CI uses it to run the test suite a second time on a loaded machine,
# so a test that depends on wall-clock speed fails here instead of intermittently elsewhere.
set -euo pipefail

n=$(nproc 2>/dev/null || echo 2)
if [[ "${1:-}" == "-n" ]]; then
    n=$2
    shift 2
fi
if [[ $# -eq 0 ]]; then
    echo "usage: $0 [-n N] CMD ARGS..." >&2
    exit 2
fi

hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${hogs[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$n"); do
    # A subshell spinning in the shell itself: no child processes, one pid to stop.
    (trap - EXIT INT TERM; while :; do :; done) &
    hogs+=("$!")
done
echo "with-cpu-hog: $n busy process(es): ${hogs[*]}" >&2

status=0
"$@" || status=$?
exit "$status"
