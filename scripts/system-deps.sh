#!/usr/bin/env bash
# Install the Debian packages yomite needs, only those missing.
#   scripts/system-deps.sh run    # what `make run` needs (PortAudio, PulseAudio client, espeak-ng;
#                                 # no ffmpeg: audio files go through PyAV's own FFmpeg libraries)
#   scripts/system-deps.sh test   # plus what the tests need (PulseAudio server, Chromium, CJK fonts,
#                                 # the rubberband program: the tempo's fallback where pylibrb
#                                 # has no wheel, checked against the library; the ffmpeg program:
#                                 # an encoder and decoder independent of PyAV, which makes the
#                                 # tests' files of every container and checks the Opus lengths;
#                                 # iptables and iproute2: the partition tests' network
#                                 # namespaces and packet filters; libnss3-tools: certutil, which
#                                 # makes the TLS tests' Chromium trust a server's own CA)
# As root it calls apt-get; otherwise sudo if available; otherwise it prints the command to run.
set -euo pipefail
want=(libportaudio2 libasound2-plugins pulseaudio-utils espeak-ng)
if [ "${1:-run}" = test ]; then
    want+=(pulseaudio chromium fonts-noto-cjk rubberband-cli ffmpeg nats-server postgresql iptables iproute2 libnss3-tools)
fi
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "yomite needs these Debian packages: ${missing[*]}" >&2
        echo "run as root:  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi
echo "installing Debian packages: ${missing[*]}"
echo "  (with their dependencies; about a minute and a half on a fresh Debian 12 machine)"
$sudo apt-get update -qq
# one line a package as it is set up, rather than a minute of silence or apt's whole log
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q -o Dpkg::Use-Pty=0 \
    --no-install-recommends "${missing[@]}" | sed -un 's/^Setting up \([^ :]*\).*/  set up \1/p'
echo "Debian packages installed"
