#!/usr/bin/env bash
# What `make test` runs once the packages are in: the suite (in parallel, a test file to a
# worker), then ruff and mypy whatever the suite said, then one line for all three. The sound
# server is started if it was not up and stopped again after; anything else the suite started
# and left running (a server, a Chromium) is named, stopped, and fails the run.
#
#   scripts/test.sh [pytest arguments]       e.g. scripts/test.sh -m 'not browser'
#   YOMITE_TEST_WORKERS=1 scripts/test.sh    one worker (the default: 4, see README: most tests
#                                            wait on real time, so four share two cores well)
set -u
cd "$(dirname "$0")/.."
bin="${BIN:-.venv/bin}"
run="${YH_RUN:-/tmp/yomite-audio}"
workers="${YOMITE_TEST_WORKERS:-4}"

# the suite starts ~60 servers and 4 workers: let them share compiled modules (a shell that
# sets PYTHONDONTWRITEBYTECODE would have each compile the whole project again)
unset PYTHONDONTWRITEBYTECODE

# every process the suite starts inherits this mark, so that what is left over can be found
mark="$$-$(date +%s%N)"
started=no
if ! scripts/audio-harness.sh status; then
    scripts/audio-harness.sh start || exit 1
    started=yes
fi
# shellcheck disable=SC1091
. "$run/env.sh"

# the browser speakers' voice clips rendered before the suite, not while they play
export YOMITE_TEST_CACHE="${YOMITE_TEST_CACHE:-/tmp/yomite-test-cache}"
BIN="$bin" scripts/warm-test-voices.sh

t0=$(date +%s)
if [ "$workers" -gt 1 ]; then
    # a test file to a worker, the longest first (tests/weights.py; xdist's own order would be
    # by number of tests); the report lets scripts/test_weights.py refresh those figures
    YOMITE_TEST_RUN="$mark" "$bin/pytest" -n "$workers" --dist loadfile --no-loadscope-reorder \
        --junitxml=.pytest_cache/junit.xml --durations=15 "$@"
else
    YOMITE_TEST_RUN="$mark" "$bin/pytest" --durations=15 "$@"
fi
tests=$?
t1=$(date +%s)
"$bin/ruff" check reader audio api hall yomite desk cluster tests bench
ruff=$?
"$bin/mypy"
mypy=$?
[ "$started" = yes ] && scripts/audio-harness.sh stop

# what is still running with the mark: give it a few seconds to end, then stop it
left() {
    grep -lsz "^YOMITE_TEST_RUN=$mark\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}
for _ in $(seq 50); do [ -z "$(left)" ] && break; sleep 0.1; done
leftover=$(left)
if [ -n "$leftover" ]; then
    echo "the suite left these running (stopped now):"
    for pid in $leftover; do ps -o pid=,args= -p "$pid" | cut -c1-160; done
    # shellcheck disable=SC2086
    kill -KILL $leftover 2>/dev/null
fi

word() { [ "$1" = 0 ] && echo ok || echo FAILED; }
echo "make test: pytest $(word $tests) in $((t1 - t0)) s ($workers workers), ruff $(word $ruff)," \
     "mypy $(word $mypy), left running: ${leftover:+$(echo $leftover | wc -w) processes}${leftover:-none}"
[ "$tests" = 0 ] && [ "$ruff" = 0 ] && [ "$mypy" = 0 ] && [ -z "$leftover" ]
