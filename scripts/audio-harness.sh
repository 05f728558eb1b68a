#!/usr/bin/env bash
# A clocked sound server for a machine with no sound card: PulseAudio with a null sink
# ("yomite") whose monitor ("yomite.monitor") the tests record.  Adapted from the recipe
# measured on these machines (see README "Audio on a headless machine").
#
#   scripts/audio-harness.sh start   # idempotent; writes $YH_RUN/env.sh
#   scripts/audio-harness.sh stop
#   scripts/audio-harness.sh status  # exit 0 if it is up
#   source "$YH_RUN/env.sh"          # PULSE_SERVER, XDG_RUNTIME_DIR, YOMITE_TEST_DEVICE ...
#
# Pitfalls handled here: rewinds corrupt the monitor (norewinds=1); an idle null sink renders
# 2 s ahead, so a "keeper" client holds it at 5 ms latency; the environment must be set before
# the process imports sounddevice (PortAudio enumerates devices at import).
set -u
run="${YH_RUN:-/tmp/yomite-audio}"
rate="${YH_RATE:-48000}"
lat="${YH_SINK_LATENCY_MS:-5}"
xdg="$run/xdg"

alive() {  # name comm
    [ -f "$run/$1.pid" ] || return 1
    local pid; pid="$(cat "$run/$1.pid")"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}
kill_one() {  # name comm
    if alive "$1" "$2"; then
        local pid; pid="$(cat "$run/$1.pid")"
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 30); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
        [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$run/$1.pid"
}
start_bg() {  # name comm cmd...
    local name="$1" comm="$2"; shift 2
    alive "$name" "$comm" && return 0
    nohup "$@" >>"$run/$name.log" 2>&1 &
    echo $! >"$run/$name.pid"
}

case "${1:-start}" in
status)  # exit 0 if the harness is up
    alive pulseaudio pulseaudio && [ -f "$run/env.sh" ]
    exit ;;
stop)
    kill_one keeper parec
    kill_one pulseaudio pulseaudio
    rm -f "$run/env.sh"
    exit 0 ;;
start) ;;
*) echo "usage: audio-harness.sh start|stop|status" >&2; exit 2 ;;
esac

mkdir -p "$run/pulse" "$xdg"
chmod 700 "$xdg"
export XDG_RUNTIME_DIR="$xdg"
export PULSE_SERVER="unix:$run/pulse/native"
if ! pactl info >/dev/null 2>&1; then
    cat >"$run/yomite.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$run/pulse/native
load-module module-null-sink sink_name=yomite rate=$rate channels=2 norewinds=1 sink_properties=device.description=YomiteNullSink
set-default-sink yomite
set-default-source yomite.monitor
PA
    start_bg pulseaudio pulseaudio pulseaudio -n -F "$run/yomite.pa" --daemonize=no \
        --exit-idle-time=-1 --use-pid-file=no --log-target=stderr --log-level=notice
    for _ in $(seq 50); do pactl info >/dev/null 2>&1 && break; sleep 0.1; done
    pactl info >/dev/null 2>&1 || { echo "PulseAudio did not come up; see $run/pulseaudio.log" >&2; exit 1; }
fi
# A hall's sound server runs its audio at real-time priority (PulseAudio with rtkit, PipeWire):
# so does this one, every thread, where allowed. Without it, two busy cores starve the
# server's own thread and it inserts holes that no client can prevent (bench/full_hall.py).
if alive pulseaudio pulseaudio && command -v chrt >/dev/null; then
    chrt -a -f -p "${YH_PULSE_RTPRIO:-6}" "$(cat "$run/pulseaudio.pid")" >/dev/null 2>&1 || true
fi
start_bg keeper parec parec -d yomite.monitor --raw --format=s16le --rate="$rate" --channels=2 \
    --latency-msec="$lat" /dev/null
cat >"$run/env.sh" <<ENV
export YH_RUN=$run
export XDG_RUNTIME_DIR=$xdg
export PULSE_SERVER=$PULSE_SERVER
export YOMITE_TEST_DEVICE=pulse
export YOMITE_TEST_MONITOR=yomite.monitor
export YH_SINK_LATENCY_MS=$lat
ENV
echo "audio harness up: PulseAudio null sink 'yomite', monitor 'yomite.monitor' ($run/env.sh)"
