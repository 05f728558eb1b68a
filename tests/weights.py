"""How long each test file takes, in seconds of one worker's time (a fresh clone's `make test`
on the 2-core VM, idle and loaded runs averaged). tests/conftest.py runs the files longest
first, so that no worker is still on a long file when the others are done (pytest-xdist would
otherwise hand them out by their number of tests, the single-test minute-long files last).

Only the order depends on these figures: a file not listed runs after the listed ones, and a
wrong figure costs time, never a result. Refresh after adding or lengthening a slow file:
    scripts/test.sh && .venv/bin/python scripts/test_weights.py .pytest_cache/junit.xml
and paste its output here.
"""

WEIGHTS_S: dict[str, int] = {
    "test_clip_keys.py": 18,  # measured alone (four Open JTalk voices built)
    "test_render_cache_bound.py": 140,  # measured alone (Open JTalk at 15 speeds, a restart)
    "test_wheel.py": 30,  # measured alone (the wheel built, installed, rendered, served)
    "test_recovery.py": 132,
    "test_cluster.py": 90,  # measured alone (five clusters of 2-3 processes and a broker)
    "test_cluster_speakers.py": 133,  # measured alone (two clusters, two Chromium speakers)
    "test_cluster_start.py": 25,  # measured alone (a cluster of two, its render frozen 6 s)
    "test_cluster_census.py": 25,  # measured alone (a cluster, a kill, 15 s of expiry)
    "test_cluster_rooms.py": 20,  # measured alone (three processes, a kill, a restart)
    "test_cluster_quota.py": 10,  # measured alone (a cluster, twelve opens)
    "test_cluster_page_quota.py": 45,  # measured alone (two clusters, 16 pages at once, a kill)
    "test_cluster_desk.py": 50,  # measured alone (three clusters on PostgreSQL, a whole day)
    "test_bench_cluster.py": 100,  # measured alone under load (three clusters, a kill)
    "test_cluster_partition.py": 300,  # measured alone (cuts of 3-60 s, an edge, a stall)
    "test_desk_outage.py": 150,  # measured alone (PostgreSQL stopped, cut, a slow commit)
    "test_cluster_brokers.py": 230,  # measured alone (three broker nodes, four losses, TTL 30)
    "test_cluster_bus_security.py": 80,  # measured alone (open and closed brokers, TLS)
    "test_netns.py": 25,  # measured alone (namespaces, cuts, loss, the relay)
    "test_tls.py": 55,  # measured alone (servers in namespaces, Chromium trusting their CA)
    "test_speaker_link.py": 275,  # measured under load (three matches behind a relay, Chromium)
    "test_presses_netns.py": 90,  # measured under load (scripted phones through loss, outages)
    "test_presses_server.py": 60,  # measured under load (a real server, WebSocket and REST)
    "test_referee_link.py": 40,  # measured under load (Chromium, a frozen server)
    "test_speaker_clock.py": 30,  # measured under load (Chromium, a simulated link)
    "test_tenure.py": 10,
    "test_cluster_lease.py": 8,
    "test_fuzz.py": 103,
    "test_pages.py": 92,
    "test_speaker_pages.py": 125,  # with a fourth card (a second reload, when one is slow)
    "test_faults.py": 91,
    "test_openjtalk.py": 57,
    "test_api.py": 48,
    "test_desk_recovery.py": 48,
    "test_server.py": 45,
    "test_hostile.py": 43,
    "test_record_page.py": 43,
    "test_classroom_pages.py": 60,
    "test_desk_projector.py": 40,  # measured alone under load (Chromium at four sizes)
    "test_desk_errors.py": 14,  # measured alone
    "test_desk_day_clicks.py": 20,  # measured alone (40 entries to round 1 in Chromium)
    "test_health.py": 10,  # measured alone (a server of 16 channels)
    "test_rooms_isolation.py": 18,  # measured alone (a whole match, route by route)
    "test_rooms_page.py": 10,  # measured alone (Chromium)
    "test_rooms_api.py": 9,  # measured alone (two servers, one restarted)
    "test_rooms_idle.py": 2,  # measured alone (in-process)
    "test_voice_unavailable.py": 12,  # measured alone (an Open JTalk server)
    "test_cli.py": 41,
    "test_recording.py": 39,
    "test_renderpool.py": 35,
    "test_pin_lock.py": 34,
    "test_secrecy.py": 33,
    "test_referee_flood.py": 29,
    "test_recovery_restarts.py": 28,
    "test_page_policy.py": 28,
    "test_desk_server.py": 26,
    "test_pack_use.py": 26,
    "test_door.py": 25,
    "test_desk_load.py": 25,
    "test_device.py": 22,
    "test_desk_pages.py": 22,
    "test_desk_fuzz.py": 21,
    "test_reliability.py": 20,
    "test_desk_hostile.py": 18,
    "test_process_sink.py": 17,
    "test_espeak.py": 15,
    "test_scheduling.py": 14,
    "test_engine_properties.py": 14,
    "test_pack.py": 13,
    "test_desk_api.py": 12,
    "test_audio_fault.py": 12,
    "test_codec.py": 10,
    "test_classroom_api.py": 10,
    "test_desk_pairing.py": 10,
    "test_pcm.py": 8,
    "test_pages_head.py": 7,
    "test_runtime_faults.py": 7,
    "test_engine_atomic.py": 6,
    "test_desk_views.py": 4,
    "test_openapi.py": 4,
    "test_catalogue.py": 3,
}
