"""Where phones can reach the server: the interfaces' addresses (the default route's first),
not the machine's name, which a stock Debian /etc/hosts maps to loopback."""

import socket
import subprocess

import pytest

from api.addresses import Candidate, candidates, default_route_address, lan_addresses


def ip_default_source() -> str | None:
    """The default route's source address as iproute2 sees it (independent of yomite)."""
    out = subprocess.run(["ip", "-4", "-o", "route", "get", "198.51.100.1"],
                         capture_output=True, text=True)
    words = out.stdout.split()
    return words[words.index("src") + 1] if "src" in words else None


def test_the_default_route_comes_first_although_the_name_resolves_to_loopback():
    expected = ip_default_source()
    if expected is None:
        pytest.fail("this machine has no default route: the test needs one (a LAN)")
    # the trap this guards against: the machine's own name leads only to loopback here
    named = {i[4][0] for i in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    assert all(a.startswith("127.") for a in named), (
        f"{socket.gethostname()} resolves to {named}: not the case this test is about")
    assert default_route_address() == expected
    found = lan_addresses()
    assert found[0][0] == expected and found[0][1].startswith("default route")
    assert not any(a.startswith("127.") for a, _ in found)


def test_candidates_in_order_of_preference():
    lan = lan_addresses()[0][0]
    c = candidates("0.0.0.0", 8080, None, "http://127.0.0.1:8080/")
    assert c[0] == Candidate(f"http://{lan}:8080", c[0].source) and not c[0].loopback
    assert all(not x.loopback for x in c), "a loopback page address is not offered to phones"
    c = candidates("0.0.0.0", 8080, "https://yomite.hall.example/", "http://127.0.0.1:8080/")
    assert [x.source for x in c][:1] == ["public_url"]
    assert c[0].base == "https://yomite.hall.example" and c[1].base == f"http://{lan}:8080"
    c = candidates("0.0.0.0", 8080, None, "http://yomite.local:8080/")
    assert c[-1] == Candidate("http://yomite.local:8080", "this page")
    # bound to loopback only: that is all there is, and it says so
    c = candidates("127.0.0.1", 9000, None, "http://127.0.0.1:9000/")
    assert c == [Candidate("http://127.0.0.1:9000", "server.host")] and c[0].loopback
    assert candidates("::1", 9000, None)[0].base == "http://[::1]:9000"
