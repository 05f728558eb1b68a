"""https on a hall's network (docs/tls.md, api/certs.py, api/https.py): a real `yomite serve`
on an address of a network namespace (tests/netns.py: the root namespace reaches it over a
bridge, as a phone would over the hall's Wi-Fi) serves https with a certificate its own CA
signed, keeps the CA, makes a new server certificate when its addresses change, gives the CA
over plain http and nothing else; real Chromium that trusts the CA (its NSS database,
certutil) loads the referee and the speaker pages over https, the speaker's AudioWorklet gate
on; `--insecure-http` serves plain http and every page says so; loopback stays plain http."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
import websockets
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from tests import netns
from tests.chromium import (
    AUDIO_ARGS,
    AUDIO_LAUNCH,
    CHROMIUM,
    CHROMIUM_ARGS,
    require_chromium,
    watch_errors,
)
from tests.serverproc import Server

TOKEN = "tls-operator-token-0123456789abcdef"
CONFIG: dict[str, Any] = {
    "voice": {"engine": "estimate"}, "audio": {"output": "null"},
    "server": {"channels": [{"name": "main", "output": "browser"}]}}
NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def net() -> Iterator[netns.Net]:
    with netns.Net() as n:
        yield n


def verify(ca_pem: bytes, leaf_pem: bytes, name: str, now: dt.datetime = NOW) -> None:
    """RFC 5280 path validation (cryptography's verifier: the CA's name constraints too) of
    the server certificate for `name`; VerificationError if a client would refuse it."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    leaf = x509.load_pem_x509_certificates(leaf_pem)[0]
    try:
        subject: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        subject = x509.DNSName(name)
    verifier = PolicyBuilder().store(Store([ca])).time(now).build_server_verifier(subject)
    verifier.verify(leaf, [])


# ---------------------------------------------------------------------- the CA, pure
def test_the_ca_is_kept_and_the_server_certificate_follows_the_addresses(tmp_path: Path):
    from api.certs import Names, own_ca

    folder = tmp_path / "tls"
    first = own_ca(folder, Names.of(["localhost", "hall", "127.0.0.1", "192.168.1.5"]),
                   now=NOW)
    assert first.mode == "own_ca" and first.tls and first.reissued and not first.uncovered
    assert first.ca_pem == (folder / "ca.crt").read_bytes()
    ca_der = x509.load_pem_x509_certificate(first.ca_pem).public_bytes(
        serialization.Encoding.DER)
    assert first.fingerprint == ":".join(f"{b:02X}" for b in hashlib.sha256(ca_der).digest())
    assert (folder / "ca.key").stat().st_mode & 0o077 == 0
    assert (folder / "server.key").stat().st_mode & 0o077 == 0
    leaf = (folder / "server.crt").read_bytes()
    for name in ("192.168.1.5", "127.0.0.1", "hall", "localhost"):
        verify(first.ca_pem, leaf, name)
    with pytest.raises(VerificationError):
        verify(first.ca_pem, leaf, "10.0.0.9")  # not one of its addresses

    # the same addresses: nothing made again
    again = own_ca(folder, Names.of(["hall", "localhost", "192.168.1.5", "127.0.0.1"]),
                   now=NOW + dt.timedelta(days=30))
    assert not again.reissued and (folder / "server.crt").read_bytes() == leaf
    assert again.fingerprint == first.fingerprint

    # another Wi-Fi: a new server certificate from the same CA (phones keep trusting it)
    moved = own_ca(folder, Names.of(["localhost", "hall", "127.0.0.1", "10.1.2.3"]),
                   now=NOW + dt.timedelta(days=31))
    assert moved.reissued and moved.fingerprint == first.fingerprint
    new_leaf = (folder / "server.crt").read_bytes()
    verify(moved.ca_pem, new_leaf, "10.1.2.3", NOW + dt.timedelta(days=31))
    with pytest.raises(VerificationError):
        verify(moved.ca_pem, new_leaf, "192.168.1.5", NOW + dt.timedelta(days=31))

    # a month before it expires: made again
    late = NOW + dt.timedelta(days=31 + 397 - 29)
    assert own_ca(folder, Names.of(["localhost", "hall", "127.0.0.1", "10.1.2.3"]),
                  now=late).reissued


def test_the_ca_vouches_only_for_the_hall_not_for_the_web(tmp_path: Path):
    """Name constraints: a CA whose key a thief took from the teacher's laptop cannot vouch
    for a bank to the phones that trust it. A name the server takes later outside them is
    said (`uncovered`), and a client refuses it."""
    from api.certs import Names, own_ca

    folder = tmp_path / "tls"
    made = own_ca(folder, Names.of(["localhost", "203.0.113.7", "hall.example.org"]), now=NOW)
    leaf = (folder / "server.crt").read_bytes()
    verify(made.ca_pem, leaf, "203.0.113.7")  # a public address it had when it was made
    verify(made.ca_pem, leaf, "hall.example.org")
    later = own_ca(folder, Names.of(["localhost", "203.0.113.7", "hall.example.org",
                                     "www.bank.example", "198.51.100.9", "printer.local"]),
                   now=NOW)
    assert later.fingerprint == made.fingerprint
    assert sorted(later.uncovered) == ["198.51.100.9", "www.bank.example"]
    leaf = (folder / "server.crt").read_bytes()
    verify(later.ca_pem, leaf, "printer.local")
    for name in ("www.bank.example", "198.51.100.9"):
        with pytest.raises(VerificationError):
            verify(later.ca_pem, leaf, name)


def test_a_ca_that_cannot_be_read_is_never_replaced_silently(tmp_path: Path):
    from api.certs import CertificateError, Names, own_ca

    folder = tmp_path / "tls"
    own_ca(folder, Names.of(["localhost", "127.0.0.1"]), now=NOW)
    kept = (folder / "ca.key").read_bytes()
    (folder / "ca.crt").write_text("not a certificate", "utf-8")
    with pytest.raises(CertificateError, match="remove both to make a new one"):
        own_ca(folder, Names.of(["localhost", "127.0.0.1"]), now=NOW)
    assert (folder / "ca.key").read_bytes() == kept


# ---------------------------------------------------------------------- real servers
def peer_certificate(host: str, port: int, context: ssl.SSLContext) -> bytes:
    with socket.create_connection((host, port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)


async def hello(url: str, **kw: Any) -> dict[str, Any]:
    async with websockets.connect(url, open_timeout=30, **kw) as ws:
        msg: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 30))
        return msg


@pytest.mark.server
def test_a_server_on_the_network_speaks_https_with_its_own_ca(tmp_path: Path, net: netns.Net):
    a, b = net.host("a"), net.host("b")
    s = Server(tmp_path, CONFIG, TOKEN, host=a.ip, netns=a.ns, tls=True)
    assert s.base == f"https://{a.ip}:{s.port}"
    tls_dir = s.ca.parent
    s.start()
    try:
        ctx = s.verify
        assert isinstance(ctx, ssl.SSLContext)
        assert "https with this server's own certificate authority" in s.log()
        ca_pem = s.ca.read_bytes()
        verify(ca_pem, peer_certificate(a.ip, s.port, ctx), a.ip, dt.datetime.now(dt.UTC))
        # no client trusts it by itself
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(f"{s.base}/api/health", timeout=30)
        info = httpx2.get(f"{s.base}/api/tls", verify=ctx, timeout=30).json()
        assert info["mode"] == "own_ca" and info["https"] is True
        plain = f"http://{a.ip}:{s.port}"
        assert info["ca_url"] == f"{plain}/ca.crt"
        # plain http: the CA, fetched before the phone trusts the server; it is the one the
        # fingerprint names
        r = httpx2.get(f"{plain}/ca.crt", timeout=30)
        assert r.status_code == 200 and r.content == ca_pem
        der = x509.load_pem_x509_certificate(r.content).public_bytes(serialization.Encoding.DER)
        assert info["fingerprint_sha256"] == ":".join(
            f"{x:02X}" for x in hashlib.sha256(der).digest())
        assert httpx2.get(f"{plain}/api/tls", timeout=30).json()["mode"] == "own_ca"
        qr = httpx2.get(f"{plain}/api/tls/qr.svg", timeout=30)
        assert qr.status_code == 200 and qr.content.startswith(b"<?xml")
        # a page: to https; anything that may carry a secret: refused before a route reads it
        r = httpx2.get(f"{plain}/referee/main", timeout=30)
        assert r.status_code == 308
        assert r.headers["location"] == f"{s.base}/referee/main"
        pin = httpx2.get(f"{s.base}/api/channels/main/pin", headers=s.op, verify=ctx,
                         timeout=30).json()
        assert pin["join_url"].startswith(f"{s.base}/referee/main")
        r = httpx2.post(f"{plain}/api/channels/main/referees", timeout=30,
                        json={"pin": pin["pin"], "name": "clear"})
        assert r.status_code == 403 and r.json()["error"] == "https_required"
        r = httpx2.get(f"{plain}/api/channels/main", headers=s.op, timeout=30)
        assert r.status_code == 308  # (the token was sent in clear: the client's doing)
        with pytest.raises(websockets.InvalidStatus) as refused:
            asyncio.run(hello(f"ws://{a.ip}:{s.port}/ws/channels/main"))
        assert refused.value.response.status_code == 403
        # wss with the CA
        assert asyncio.run(hello(f"wss://{a.ip}:{s.port}/ws/channels/main",
                                 ssl=ctx))["type"] == "hello"
        joined = httpx2.post(f"{s.base}/api/channels/main/referees", verify=ctx, timeout=30,
                             json={"pin": pin["pin"], "name": "tls"})
        assert joined.status_code in (200, 201), joined.text
    finally:
        s.stop()
    leaf = (tls_dir / "server.crt").read_bytes()

    # started again on the same address: the CA and the server certificate kept
    s.start()
    try:
        assert (tls_dir / "server.crt").read_bytes() == leaf
        assert s.ca.read_bytes() == ca_pem
    finally:
        s.stop()

    # on another address (another Wi-Fi): a new server certificate from the same CA
    moved = Server(tmp_path, CONFIG, TOKEN, host=b.ip, netns=b.ns, tls=True)
    moved.start()
    try:
        assert moved.ca.read_bytes() == ca_pem
        assert (tls_dir / "server.crt").read_bytes() != leaf
        ctx = moved.verify
        assert isinstance(ctx, ssl.SSLContext)
        verify(ca_pem, peer_certificate(b.ip, moved.port, ctx), b.ip, dt.datetime.now(dt.UTC))
        assert httpx2.get(f"{moved.base}/api/health", verify=ctx, timeout=30).status_code == 200
    finally:
        moved.stop()


@pytest.mark.server
def test_loopback_stays_plain_http(tmp_path: Path):
    s = Server(tmp_path, CONFIG, TOKEN).start()
    try:
        assert s.base.startswith("http://127.0.0.1:")
        info = httpx2.get(f"{s.base}/api/tls", timeout=30).json()
        assert info == {"mode": "plain", "https": False, "ca_url": None,
                        "fingerprint_sha256": None, "uncovered": []}
        r = httpx2.get(f"{s.base}/ca.crt", timeout=30)
        assert r.status_code == 404 and r.json()["error"] == "no_own_ca"
        assert httpx2.get(f"{s.base}/referee/main", timeout=30).status_code == 200
        assert not s.ca.exists()
    finally:
        s.stop()


@pytest.mark.server
def test_a_websocket_takes_its_token_as_a_subprotocol(tmp_path: Path):
    """What the pages do (api/static/common.js): the token as `yomite.bearer.<base64url>`
    beside `yomite`, which the server chooses; nothing in the URL."""
    import base64

    s = Server(tmp_path, CONFIG, TOKEN).start()
    try:
        pin = httpx2.get(f"{s.base}/api/channels/main/pin", headers=s.op, timeout=30).json()
        joined = httpx2.post(f"{s.base}/api/channels/main/referees", timeout=30,
                             json={"pin": pin["pin"], "name": "sub"}).json()

        async def hello_as(token: str | None) -> tuple[str | None, dict[str, Any]]:
            offered = ["yomite"]
            if token:
                b64 = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
                offered.append(f"yomite.bearer.{b64}")
            async with websockets.connect(f"ws://127.0.0.1:{s.port}/ws/channels/main",
                                          subprotocols=offered,  # type: ignore[arg-type]
                                          open_timeout=30) as ws:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
                return ws.subprotocol, msg

        chosen, msg = asyncio.run(hello_as(joined["token"]))
        assert chosen == "yomite"
        assert msg["role"] == "referee" and msg["referee"] == joined["referee"]
        chosen, msg = asyncio.run(hello_as(TOKEN))
        assert chosen == "yomite" and msg["role"] == "operator"
        chosen, msg = asyncio.run(hello_as(None))
        assert chosen == "yomite" and msg["role"] == "viewer"
    finally:
        s.stop()


# ---------------------------------------------------------------------- real pages
def trusting_home(tmp: Path, ca: Path) -> Path:
    """A HOME whose NSS database (what Chromium on Linux trusts besides the system's) holds
    `ca` as a trusted CA, as a teacher's Chromebook does once it installed the server's."""
    certutil = shutil.which("certutil")
    if certutil is None:
        pytest.fail("certutil is missing: install Debian's libnss3-tools "
                    "(scripts/system-deps.sh test does)")
    db = tmp / "home" / ".pki" / "nssdb"
    db.mkdir(parents=True)
    for args in (["-N", "--empty-password"], ["-A", "-t", "C,,", "-n", "yomite", "-i", str(ca)]):
        subprocess.run([certutil, "-d", f"sql:{db}", *args], check=True, capture_output=True,
                       timeout=60)
    return tmp / "home"


def no_secret_in(urls: list[str], secrets: dict[str, str]) -> list[str]:
    """The URLs (their part a browser sends: the fragment never leaves it) that hold one of
    `secrets`, as it is or percent-encoded, with the secret's name."""
    found = []
    for url in urls:
        sent = url.split("#", 1)[0]
        for what, secret in secrets.items():
            if secret in sent or quote(secret, safe="") in sent:
                found.append(f"{what} in {sent}")
    return found


@pytest.mark.server
@pytest.mark.browser
def test_chromium_that_trusts_the_ca_loads_the_pages_over_https_and_no_url_holds_a_secret(
        tmp_path: Path, net: netns.Net):
    """Real Chromium that trusts the server's CA (its NSS database) joins as a referee by the
    join link, plays as a speaker by the speaker link (its AudioWorklet gate on: a secure
    context), runs the console by its link and signs a teacher in by the invite link, over
    https and wss; every URL those pages request (Playwright's requests and WebSockets, and
    the server's own access log, which sees the speaker's worker socket too) is free of the
    PIN, the operator's, the referee's and the teacher's tokens, the speaker key and the
    invite code, and none stays in the address bar."""
    from playwright.sync_api import expect, sync_playwright

    a = net.host("a")
    s = Server(tmp_path, CONFIG, TOKEN, host=a.ip, netns=a.ns, tls=True).start()
    try:
        ctx = s.verify
        pin = httpx2.get(f"{s.base}/api/channels/main/pin", headers=s.op, verify=ctx,
                         timeout=30).json()
        speaker = httpx2.get(f"{s.base}/api/channels/main/speakers", headers=s.op, verify=ctx,
                             timeout=30).json()["url"]
        assert speaker.startswith(f"{s.base}/speaker/main#key=")
        org = httpx2.post(f"{s.base}/api/orgs", headers=s.op, verify=ctx, timeout=30,
                          json={"name": "tls school"}).json()
        secrets = {"PIN": pin["pin"], "operator token": TOKEN,
                   "speaker key": speaker.split("#key=", 1)[1], "invite code": org["code"]}
        home = trusting_home(tmp_path, s.ca)
        require_chromium()
        errors: list[str] = []
        urls: list[str] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *AUDIO_ARGS],
                env={**os.environ, "HOME": str(home)}, **AUDIO_LAUNCH)
            try:
                def page(prefix: str) -> Any:
                    context = browser.new_context(locale="ja-JP")
                    context.on("request", lambda r: urls.append(r.url))
                    p = watch_errors(context.new_page(), errors, prefix)
                    p.on("websocket", lambda w: urls.append(w.url))
                    return p

                ref = page("referee: ")
                ref.goto(pin["join_url"])  # raises on a certificate Chromium does not trust
                assert ref.evaluate("location.protocol + isSecureContext") == "https:true"
                assert ref.url == f"{s.base}/referee/main", "the PIN left in the address bar"
                expect(ref.locator("#pin")).to_have_value(pin["pin"])
                ref.fill("#name", "tls")
                ref.click("#join-button")
                expect(ref.locator("#live")).to_be_visible(timeout=30_000)
                expect(ref.locator("#conn")).to_have_attribute("data-state", "online",
                                                               timeout=30_000)
                assert ref.locator("#insecure-http").count() == 0
                me = json.loads(ref.evaluate("localStorage.getItem('yomite.referee.main')"))
                secrets["referee token"] = me["token"]

                sp = page("speaker: ")
                sp.goto(speaker)
                assert sp.evaluate("isSecureContext") is True
                assert sp.url == f"{s.base}/speaker/main", "the key left in the address bar"
                sp.click("#enable")
                sp.wait_for_function("() => window.Y && Y.speaker && Y.speaker.ready "
                                     "&& Y.speaker.gateSettled", timeout=30_000)
                # the gate on the audio thread: only a secure context has AudioWorklet
                assert sp.evaluate("Y.speaker.stats().gate") == "worklet"
                expect(sp.locator("#conn")).to_have_attribute("data-state", "online",
                                                              timeout=30_000)

                console = page("console: ")
                console.goto(f"{s.base}/console#token={TOKEN}")
                expect(console.locator("#conn")).to_have_attribute("data-state", "online",
                                                                   timeout=30_000)
                assert TOKEN not in console.url
                expect(console.locator("#trust")).to_be_visible()
                expect(console.locator("#trust-fp")).to_have_text(
                    httpx2.get(f"{s.base}/api/tls", verify=ctx, timeout=30).json()[
                        "fingerprint_sha256"])

                start = page("start: ")
                assert org["invite_url"] == f"{s.base}/start#invite={org['code']}"
                start.goto(org["invite_url"])
                assert start.url == f"{s.base}/start", "the invite code left in the address bar"
                expect(start.locator("#code")).to_have_value(org["code"])
                start.fill("#name", "先生")
                start.click("#signin-button")
                expect(start.locator("#home")).to_be_visible(timeout=30_000)
                secrets["teacher token"] = json.loads(
                    start.evaluate("localStorage.getItem('yomite.operator')"))
                for p in (ref, sp, console, start):  # a round of each page's traffic more
                    p.reload()
                expect(ref.locator("#conn")).to_have_attribute("data-state", "online",
                                                               timeout=30_000)
                expect(console.locator("#conn")).to_have_attribute("data-state", "online",
                                                                   timeout=30_000)
            finally:
                browser.close()
        assert not errors, errors
        assert len(urls) > 20 and any(u.startswith("wss://") for u in urls), urls
        assert all(u.startswith(("https://", "wss://", "data:")) for u in urls), urls
        assert not no_secret_in(urls, secrets)
        # what reached the server: every request line (the worker's WebSocket included)
        lines = [ln for ln in s.log().splitlines() if '"GET ' in ln or '"WebSocket ' in ln
                 or '"POST ' in ln]
        assert any('"WebSocket /ws/channels/main' in ln for ln in lines), lines[-20:]
        assert not no_secret_in(lines, secrets)
        assert not [ln for ln in lines if re.search(r"[?&](pin|token|invite|key)=", ln)]
    finally:
        s.stop()


INSECURE = {"ja": "この接続は\u200b暗号化されていません", "en": "This connection is not encrypted"}


@pytest.mark.server
@pytest.mark.browser
def test_insecure_http_serves_plain_http_and_every_page_says_so(tmp_path: Path,
                                                                net: netns.Net):
    from playwright.sync_api import expect, sync_playwright

    a = net.host("a")
    s = Server(tmp_path, CONFIG, TOKEN, host=a.ip, netns=a.ns)  # --insecure-http
    assert s.base == f"http://{a.ip}:{s.port}"
    s.start()
    try:
        assert "WARNING: plain http on the network (--insecure-http)" in s.log()
        assert httpx2.get(f"{s.base}/api/tls", timeout=30).json()["mode"] == "insecure"
        assert not s.ca.exists()
        require_chromium()
        errors: list[str] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for path in ("/referee/main", "/display/main", "/speaker/main", "/console",
                             "/start", "/desk"):
                    page = watch_errors(browser.new_page(locale="ja-JP"), errors, path)
                    page.goto(f"{s.base}{path}")
                    banner = page.locator("#insecure-http")
                    expect(banner).to_be_visible()
                    assert INSECURE["ja"] in banner.inner_text(), path
                    page.locator("button.lang").first.click()
                    expect(banner).to_contain_text(INSECURE["en"])
                    page.close()
            finally:
                browser.close()
        assert not [e for e in errors if "401" not in e], errors
    finally:
        s.stop()


@pytest.mark.server
def test_an_associations_own_certificate_is_served_as_given(tmp_path: Path):
    """`server.tls_cert/tls_key` (`--tls-cert/--tls-key`): https with that certificate, no CA
    of the server's own (nothing to install: /ca.crt 404); given half, a start that names
    both."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hall.example.org")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
            .not_valid_after(dt.datetime.now(dt.UTC) + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    crt, pem_key = tmp_path / "hall.crt", tmp_path / "hall.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    config = {**CONFIG, "server": {**CONFIG["server"], "tls_cert": str(crt),
                                   "tls_key": str(pem_key)}}
    s = Server(tmp_path, config, TOKEN).start()  # loopback: plain http there too
    try:
        ctx = ssl.create_default_context(cafile=str(crt))
        info = httpx2.get(f"https://127.0.0.1:{s.port}/api/tls", verify=ctx, timeout=30).json()
        der = cert.public_bytes(serialization.Encoding.DER)
        assert info["mode"] == "certificate" and info["https"] is True
        assert info["fingerprint_sha256"] == ":".join(
            f"{x:02X}" for x in hashlib.sha256(der).digest())
        assert info["ca_url"] is None
        assert peer_certificate("127.0.0.1", s.port, ctx) == crt.read_bytes()
        r = httpx2.get(f"https://127.0.0.1:{s.port}/ca.crt", verify=ctx, timeout=30)
        assert r.status_code == 404 and r.json()["error"] == "no_own_ca"
        assert not s.ca.exists()
    finally:
        s.stop()
    plain = tmp_path / "plain.yaml"
    plain.write_text(json.dumps({"journal_dir": str(tmp_path / "j2")}), "utf-8")
    half = subprocess.run([str(s.yomite), "--config", str(plain), "serve", "--host",
                           "127.0.0.1", "--port", str(s.port), "--tls-cert", str(crt)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert half.returncode == 2
    assert "tls_cert and tls_key go together" in half.stderr
