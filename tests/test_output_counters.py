"""An underrun is counted once: PortAudio flags it and ALSA says it (issue 26: the sum counted
each twice, `underruns 34 (underflows 17, xruns 17)`)."""

from audio.output.events import SinkStats
from hall.channel import output_counters


def test_an_underrun_flagged_by_portaudio_and_said_by_alsa_counts_once():
    assert output_counters(SinkStats(underflows=17, xruns=17))["underruns"] == 17


def test_one_side_missing_some_still_counts_each_once():
    both = output_counters(SinkStats(underflows=2, xruns=5, late_clips=1, faults=1))
    assert both == {"underruns": 5, "underflows": 2, "xruns": 5, "late_clips": 1,
                    "late_frames": 0, "dropped_clips": 0, "faults": 1}
    assert output_counters(SinkStats(underflows=3))["underruns"] == 3
