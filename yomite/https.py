"""Which https `yomite serve` speaks (docs/tls.md): a certificate it was given
(`server.tls_cert`, `--tls-cert/--tls-key`), plain http on loopback, plain http on the network
only when told (`server.insecure_http`, `--insecure-http`), else https with its own
certificate authority for the names and addresses it serves (api/certs.py)."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from urllib.parse import urlsplit

from api.addresses import WILDCARDS, is_loopback_host, lan_addresses
from api.certs import CertificateError, Https, Names, given, own_ca
from api.guards import own_hosts
from hall.config import Config, parse_config
from yomite.startup import StartupError


def served_names(config: Config, host: str) -> Names:
    """What the server certificate must name: the names the server answers to (the Host
    check's: localhost, this machine's names, public_url's, cluster.advertise's,
    allowed_hosts), loopback, and the addresses it listens on (every interface's, bound to
    0.0.0.0 or ::)."""
    hosts = [*own_hosts(config), "127.0.0.1", "::1"]
    if host in WILDCARDS:
        hosts += [addr for addr, _source in lan_addresses()]
    else:
        hosts.append(host)
    for url in (config.server.public_url, config.cluster.advertise):
        h = urlsplit(url).hostname if url else None
        if h:
            hosts.append(h)
    return Names.of(hosts)


def https_for(config: Config, host: str) -> Https:
    """The https this server speaks when bound to `host`. StartupError: a certificate that
    cannot be used, said before anything is served."""
    sv = config.server
    try:
        if sv.tls_cert is not None and sv.tls_key is not None:
            return given(sv.tls_cert, sv.tls_key)
        if is_loopback_host(host):
            return Https("plain")
        if sv.insecure_http:
            return Https("insecure")
        return own_ca(config.journal_dir / "tls", served_names(config, host),
                      label=socket.gethostname())
    except CertificateError as e:
        raise StartupError(str(e)) from None
    except OSError as e:
        raise StartupError(f"cannot keep the server's certificates in "
                           f"{config.journal_dir / 'tls'}: {e}") from None


def add_serve_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--tls-cert", default=None, metavar="FILE",
                   help="serve https with this certificate (PEM, the chain, the server's "
                   "first) rather than the server's own certificate authority "
                   "(server.tls_cert; docs/tls.md)")
    s.add_argument("--tls-key", default=None, metavar="FILE",
                   help="the certificate's key (PEM, unencrypted; server.tls_key)")
    s.add_argument("--insecure-http", action="store_true",
                   help="serve plain http on the network: PINs, tokens and the speaker key "
                   "travel in clear, and every page says so (server.insecure_http); on "
                   "127.0.0.1 plain http is the default anyway")


def with_arguments(cfg: Config, args: argparse.Namespace) -> Config:
    """The config as --tls-cert, --tls-key and --insecure-http change it, checked again (a
    certificate without its key is an error that names both)."""
    server: dict[str, object] = {}
    for name in ("tls_cert", "tls_key"):
        if getattr(args, name, None):
            server[name] = str(Path(getattr(args, name)))
    if getattr(args, "insecure_http", False):
        server["insecure_http"] = True
    if not server:
        return cfg
    data = cfg.model_dump(mode="json")
    data["server"].update(server)
    return parse_config(data, "command line")
