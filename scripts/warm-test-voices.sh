#!/usr/bin/env bash
# Render ahead, into the tests' voice cache ($YOMITE_TEST_CACHE), the Open JTalk clips that the
# browser-speaker tests read (tests/test_speaker_pages.py, test_speaker_link.py,
# test_speaker_restart.py, test_pages.py, test_cluster_speakers.py: blue at 0.45, pink at 0.45,
# blue at 1.0), as a hall renders its deck before the day (`yomite voices render`). On a fresh
# clone the cache is empty, and four workers rendering it at the same moment as their Chromium
# speakers play starved those speakers on two cores (a fresh clone's run: reloads of 12 s,
# starts that timed out, rejoins 335 ms off). Once rendered it takes a few seconds; a failure
# here only warns (the tests render what they lack).
#
#   BIN=.venv/bin YOMITE_TEST_CACHE=/tmp/yomite-test-cache scripts/warm-test-voices.sh
set -u
bin="${BIN:-.venv/bin}"
cache="${YOMITE_TEST_CACHE:-/tmp/yomite-test-cache}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
t0=$(date +%s)
one() {  # speed colour
    printf 'voice: {engine: openjtalk, cache_dir: "%s", speed: %s}\n' "$cache" "$1" \
        > "$dir/$1-$2.yaml"
    "$bin/yomite" voices render --config "$dir/$1-$2.yaml" --color "$2" \
        > "$dir/$1-$2.log" 2>&1 || { echo "warm-test-voices: $1 $2 failed:"; tail -3 "$dir/$1-$2.log"; }
}
# two at a time: the machine's two cores
one 0.45 blue & one 1.0 blue & wait
one 0.45 pink
echo "warm-test-voices: the speaker tests' clips in $cache ($(( $(date +%s) - t0 )) s)"
