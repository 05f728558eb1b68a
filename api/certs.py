"""https on a hall's network: this server's own certificate authority (CA) and the server
certificate it signs for the addresses the server answers on, kept in `journal_dir/tls/`
(docs/tls.md).

A phone or a Chromebook trusts the CA once (the console shows it: `/ca.crt`, its QR code and
its SHA-256 fingerprint); from then on every server certificate the CA signs is trusted, so
the CA is made once and kept, while the server certificate is made again whenever the
addresses and names it must cover change (another Wi-Fi, a new `server.public_url`), or a
month before it expires. A CA's key never leaves the folder it was made in (readable by this
user only).

A CA a pupil's phone trusts could vouch for any site on the web if its key were stolen from
the teacher's laptop; so the CA is name-constrained (RFC 5280, enforced by Chromium, Android,
iOS, macOS and OpenSSL): it vouches only for private and loopback addresses, local names
(`localhost`, `*.local`, `*.lan`, `*.home.arpa`, `*.internal`) and the names and addresses the
server had when the CA was made. A name outside them later is left out of the server
certificate (a client refuses a certificate holding one, for all its names) and said at start
(`uncovered`): then remove `ca.crt` and `ca.key` (every phone trusts the new CA again), or
give the server a certificate from a real CA (`server.tls_cert`).

An association's real certificate (`--tls-cert/--tls-key`) is used as given: no CA is made.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

CA_DAYS = 3650
# Apple's and Chromium's cap for a server certificate under a public CA is 398 days; the same
# here keeps every client's rule satisfied whatever it thinks of a CA a user installed
SERVER_DAYS = 397
RENEW_BEFORE = dt.timedelta(days=30)
# the addresses a hall's network uses: RFC 1918, the carrier-grade NAT range, link-local,
# loopback, IPv6's unique-local and link-local
PRIVATE_NETS: tuple[IpNetwork, ...] = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16",
    "127.0.0.0/8", "fc00::/7", "fe80::/10", "::1/128"))
LOCAL_SUFFIXES = ("localhost", "local", "lan", "home.arpa", "internal")

Mode = Literal["own_ca", "certificate", "insecure", "plain"]


class CertificateError(Exception):
    """A certificate or key that cannot be used; the message says which file and what to do."""


@dataclass(frozen=True, slots=True)
class Names:
    """What a server certificate names: DNS names and IP addresses (both lower-case text,
    sorted, without repeats)."""

    dns: tuple[str, ...]
    ips: tuple[str, ...]

    @classmethod
    def of(cls, hosts: list[str]) -> Names:
        dns: set[str] = set()
        ips: set[str] = set()
        for h in hosts:
            h = h.strip().strip("[]").lower().rstrip(".")
            if not h:
                continue
            try:
                ips.add(str(ipaddress.ip_address(h)))
            except ValueError:
                dns.add(h)
        return cls(tuple(sorted(dns)), tuple(sorted(ips)))

    def general_names(self) -> list[x509.GeneralName]:
        return [*(x509.DNSName(d) for d in self.dns),
                *(x509.IPAddress(ipaddress.ip_address(i)) for i in self.ips)]


@dataclass(frozen=True, slots=True)
class Https:
    """How this server speaks to the network, for the pages and the console: `mode` is
    `own_ca` (its own CA's certificate), `certificate` (one it was given), `insecure` (plain
    http on the network, by `--insecure-http`) or `plain` (plain http on loopback only).
    `ca_pem`: the CA phones install (own_ca only); `fingerprint`: that CA's SHA-256, or the
    given certificate's."""

    mode: Mode
    ca_pem: bytes | None = None
    fingerprint: str | None = None
    context: ssl.SSLContext | None = None
    uncovered: tuple[str, ...] = ()
    reissued: bool = False

    @property
    def tls(self) -> bool:
        return self.context is not None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"


def fingerprint(der: bytes) -> str:
    """A certificate's SHA-256 as settings screens show it: `AB:CD:…` (32 pairs)."""
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write(path: Path, data: bytes, private: bool) -> None:
    """Whole or not at all (a crash mid-write leaves the old file), a key readable by this
    user only from its first byte."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _constraints(names: Names) -> x509.NameConstraints:
    nets: list[IpNetwork] = list(PRIVATE_NETS)
    for i in names.ips:
        ip = ipaddress.ip_address(i)
        if not any(ip in n for n in nets):
            nets.append(ipaddress.ip_network(ip))
    dns = sorted({*LOCAL_SUFFIXES, *(d for d in names.dns if not _covered_dns(d, ()))})
    permitted: list[x509.GeneralName] = [*(x509.DNSName(d) for d in dns),
                                         *(x509.IPAddress(n) for n in nets)]
    return x509.NameConstraints(permitted_subtrees=permitted, excluded_subtrees=None)


def _covered_dns(name: str, permitted: tuple[str, ...]) -> bool:
    return any(name == p or name.endswith("." + p) for p in (*LOCAL_SUFFIXES, *permitted))


def uncovered(ca: x509.Certificate, names: Names) -> tuple[str, ...]:
    """The names and addresses `ca`'s name constraints do not permit (a client would refuse
    a certificate for them)."""
    try:
        nc = ca.extensions.get_extension_for_class(x509.NameConstraints).value
    except x509.ExtensionNotFound:
        return ()
    subtrees = nc.permitted_subtrees or []
    dns = tuple(s.value for s in subtrees if isinstance(s, x509.DNSName))
    nets = [s.value for s in subtrees if isinstance(s, x509.IPAddress)]
    out = [d for d in names.dns if not _covered_dns(d, dns)]
    out += [i for i in names.ips if not any(
        isinstance(n, ipaddress.IPv4Network | ipaddress.IPv6Network)
        and ipaddress.ip_address(i) in n for n in nets)]
    return tuple(out)


def _make_ca(names: Names, label: str, now: dt.datetime) -> tuple[x509.Certificate, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "yomite"),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"yomite CA ({label})"[:64])])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .add_extension(_constraints(names), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, _key_pem(key)


def _make_server(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, names: Names,
                 now: dt.datetime) -> tuple[x509.Certificate, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    # no common name: clients read the alternative names only, and a CN that looked like a
    # host name would be checked against the CA's constraints by some
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "yomite")])
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(min(now + dt.timedelta(days=SERVER_DAYS), ca.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(names.general_names()), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, _key_pem(key)


def _names_of(cert: x509.Certificate) -> Names:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return Names((), ())
    return Names.of([*san.get_values_for_type(x509.DNSName),
                     *(str(a) for a in san.get_values_for_type(x509.IPAddress))])


def _same_key(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> bool:
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return key.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki)


def _load_ca(folder: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    cert_path, key_path = folder / "ca.crt", folder / "ca.key"
    if not cert_path.exists() and not key_path.exists():
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as e:
        raise CertificateError(
            f"the server's certificate authority in {folder} cannot be read ({e}): restore "
            f"ca.crt and ca.key from a backup, or remove both to make a new one (every phone "
            f"and Chromebook must then trust the new one)") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _same_key(key, cert):
        raise CertificateError(f"{folder}/ca.key is not the key of {folder}/ca.crt: restore "
                               "both from a backup, or remove both to make a new authority")
    return cert, key


def _current_server(folder: Path, ca: x509.Certificate, names: Names,
                    now: dt.datetime) -> bool:
    """The server certificate in `folder` is the CA's, names exactly `names`, and is not
    about to expire."""
    try:
        cert = x509.load_pem_x509_certificate((folder / "server.crt").read_bytes())
        key = serialization.load_pem_private_key((folder / "server.key").read_bytes(), None)
    except (OSError, ValueError):
        return False
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _same_key(key, cert):
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):  # another CA's
        return False
    return _names_of(cert) == names and cert.not_valid_after_utc - RENEW_BEFORE > now


def own_ca(folder: Path, names: Names, label: str = "",
           now: dt.datetime | None = None) -> Https:
    """The CA of `folder` (made the first time) and a server certificate for `names` (made
    again when they changed); the https it gives. CertificateError: a CA that cannot be read
    (never replaced silently: phones trust it)."""
    now = now or _now()
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        folder.chmod(0o700)
    loaded = _load_ca(folder)
    if loaded is None:
        ca, ca_key_pem = _make_ca(names, label or (names.dns or names.ips or ("yomite",))[0],
                                  now)
        _write(folder / "ca.key", ca_key_pem, private=True)
        _write(folder / "ca.crt", ca.public_bytes(serialization.Encoding.PEM), private=False)
        loaded = _load_ca(folder)
        assert loaded is not None
    ca, ca_key = loaded
    # a name the CA may not vouch for is left out of the certificate: a client refuses a
    # certificate that holds one, for every name in it
    outside = uncovered(ca, names)
    covered = Names(tuple(d for d in names.dns if d not in outside),
                    tuple(i for i in names.ips if i not in outside))
    reissued = False
    if not _current_server(folder, ca, covered, now):
        cert, key_pem = _make_server(ca, ca_key, covered, now)
        _write(folder / "server.key", key_pem, private=True)
        _write(folder / "server.crt", cert.public_bytes(serialization.Encoding.PEM)
               + ca.public_bytes(serialization.Encoding.PEM), private=False)
        reissued = True
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    return Https("own_ca", ca_pem=ca_pem,
                 fingerprint=fingerprint(ca.public_bytes(serialization.Encoding.DER)),
                 context=server_context(folder / "server.crt", folder / "server.key"),
                 uncovered=outside, reissued=reissued)


def given(cert_path: Path, key_path: Path) -> Https:
    """An association's own certificate (a chain in PEM, the server's first) and its key."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError) as e:
        raise CertificateError(f"server.tls_cert {cert_path}: cannot read a PEM certificate "
                               f"({e})") from None
    return Https("certificate",
                 fingerprint=fingerprint(cert.public_bytes(serialization.Encoding.DER)),
                 context=server_context(cert_path, key_path))


def server_context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    """The server's TLS: 1.2 or later, HTTP/1.1 (uvicorn's protocol) by ALPN."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    try:
        ctx.load_cert_chain(cert_path, key_path)
    except (OSError, ssl.SSLError) as e:
        raise CertificateError(f"cannot use the certificate {cert_path} with the key "
                               f"{key_path} ({e}): the key must be the certificate's, both "
                               "PEM, the key unencrypted") from None
    return ctx
