"""`yomite serve`: the hall service on uvicorn, with its URLs, PINs and a QR code printed for the
operator."""

import contextlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import unquote_plus

import uvicorn

from api.addresses import WILDCARDS, Candidate, advertised, candidates
from api.app import create_app
from api.certs import Https
from api.doors import make_doors
from api.serverglue import uvicorn_options
from hall.config import Config
from hall.hall import Hall
from yomite.https import https_for
from yomite.startup import StartupError, bind, lock_journal, raise_open_files

log = logging.getLogger("yomite.server")


def console_link_file(hall: Hall, link: str) -> Path | None:
    """The console's link with the operator's token, in `journal_dir/console-link.txt`
    (readable by this user only), for a server whose output goes to a log; None if it cannot
    be written (said in the log)."""
    path = hall.config.journal_dir / "console-link.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.touch(0o600)
        tmp.chmod(0o600)
        tmp.write_text(link + "\n", "utf-8")
        tmp.replace(path)
    except OSError as e:
        log.warning("cannot write %s (%s)", path, e)
        return None
    return path


def local_base(host: str, port: int, https: Https) -> str | None:
    """Where a browser on this machine opens the pages without a certificate to trust: plain
    http on loopback (a server with TLS serves it there too: api/https.py); None for a
    server bound to one address of the network only."""
    if host in WILDCARDS:
        return f"http://{'[::1]' if host == '::' else '127.0.0.1'}:{port}"
    if not https.tls and host in ("127.0.0.1", "::1", "localhost"):
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"
    return None


def https_lines(https: Https, bases: list[Candidate], config_tls: str | None) -> list[str]:
    """What the banner says of https: how phones trust the server, or that they cannot."""
    if https.mode == "own_ca":
        ca = "http://" + bases[0].base.split("://", 1)[1] + "/ca.crt"
        lines = ["  https with this server's own certificate authority: each phone or "
                 "Chromebook trusts it once",
                 f"    download {ca} (its QR code is on the console) and compare its SHA-256:",
                 f"    {https.fingerprint}"]
        if https.uncovered:
            lines.append("  WARNING: the certificate authority may not vouch for "
                         f"{', '.join(https.uncovered)}: browsers will refuse those names. "
                         "Remove ca.crt and ca.key from journal_dir/tls to make a new one "
                         "(phones trust it again), or set server.tls_cert (docs/tls.md)")
        return lines
    if https.mode == "certificate":
        return [f"  https with the certificate {config_tls} (SHA-256 {https.fingerprint})"]
    if https.mode == "insecure":
        return ["  WARNING: plain http on the network (--insecure-http): PINs, tokens and the "
                "speaker key travel in clear, and every page says so"]
    return []


def banner(hall: Hall, bases: list[Candidate], token: str, generated: bool,
           out: TextIO = sys.stdout, https: Https | None = None,
           local: str | None = None) -> None:
    base = bases[0].base
    https = https or Https("plain")
    print(f"\nyomite is serving on {base}", file=out)
    link = f"{base}/console#token={token}"
    kept = console_link_file(hall, link)
    if out.isatty():  # the operator at the keyboard: the link to open
        print(f"  operator console: {link}", file=out)
        if local is not None and https.tls:
            print(f"    on this computer: {local}/console#token={token}", file=out)
    else:  # a service's log is read by others: the token stays out of it
        where = f"in {kept}, readable by this user only" if kept else "not kept (see above)"
        print(f"  operator console: {base}/console (the link with the operator's token is "
              f"{where})", file=out)
    if generated:
        print("  (operator token generated for this run; set server.security.operator_token "
              "in config.yaml to keep one)", file=out)
    tls_cert = str(hall.config.server.tls_cert) if hall.config.server.tls_cert else None
    for line in https_lines(https, bases, tls_cert):
        print(line, file=out)
    for name, svc in hall.channels.items():
        join = f"{base}/referee/{name}#pin={svc.pin}"
        print(f"  channel {name}: audio -> {svc.audio}", file=out)
        print(f"    referees: {join}   (PIN {svc.pin})", file=out)
        print(f"    projector: {base}/display/{name}", file=out)
    if bases[0].loopback:
        print("  WARNING: no network address found: phones cannot reach "
              f"{base}. Connect this machine to the hall's network (then restart), or set "
              "server.public_url", file=out)
    if len(bases) > 1:
        print("  phones may also use (the console can switch its QR code to any of them):",
              file=out)
        for c in bases[1:]:
            print(f"    {c.base}   ({c.source})", file=out)
    first = next(iter(hall.channels.values()))
    try:
        import qrcode

        qr = qrcode.QRCode(border=1)
        qr.add_data(f"{base}/referee/{first.name}#pin={first.pin}")
        print(f"\n  scan to referee channel {first.name}:", file=out)
        qr.print_ascii(out=out, invert=True)
    except Exception as e:  # the QR is a convenience: never a reason not to serve
        print(f"  (no terminal QR code: {e})", file=out)
    out.flush()


class RedactSecrets(logging.Filter):
    """Access logs print request lines: a script's WebSocket `?token=` and an old join link's
    `?pin=` must never reach them (the pages put no secret in a URL: docs/tls.md). The query
    is redacted as the server's parser reads it: a key is percent-decoded (and `+` is a
    space) before it is compared, so `?%74oken=` (which authenticates as `token`) is
    redacted too."""

    SECRET_KEYS = frozenset({"token", "pin", "invite"})
    QUERY = re.compile(r"\?([^\s\"']*)")

    @classmethod
    def redact(cls, text: str) -> str:
        def query(m: re.Match[str]) -> str:
            parts = []
            for part in m.group(1).split("&"):
                key, eq, _value = part.partition("=")
                if eq and unquote_plus(key).strip().lower() in cls.SECRET_KEYS:
                    part = f"{key}=***"
                parts.append(part)
            return "?" + "&".join(parts)

        return cls.QUERY.sub(query, text)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(
                self.redact(a) if isinstance(a, str) else a
                for a in (record.args if isinstance(record.args, tuple) else (record.args,))
            )
        if isinstance(record.msg, str):
            record.msg = self.redact(record.msg)
        return True


def realtime_loop(priority: int) -> str:
    """Make the calling thread (the event loop's) SCHED_RR at `priority` where allowed, with
    SCHED_RESET_ON_FORK: threads and processes it starts later get ordinary scheduling. Under
    two busy cores a nice -10 loop still woke 50-290 ms late (measured in the full-hall
    bench); a real-time one runs the moment a referee's message arrives. Returns what the
    thread now runs at, for /api/health."""
    if priority > 0 and hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(priority))
            return f"realtime {priority}"
        except OSError:  # no rtprio allowed: ordinary scheduling
            pass
    return f"nice {os.getpriority(os.PRIO_PROCESS, 0)}"


def open_console_page(link: str, out: TextIO = sys.stdout) -> None:
    """The console in this computer's browser (`yomite` with no command, `serve --open`), from
    a thread: a browser that takes its time to start never holds the service. `$BROWSER`
    chooses the browser, as everywhere `webbrowser` is used."""
    import threading
    import webbrowser

    def go() -> None:
        try:
            opened = webbrowser.open(link)
        except Exception as e:  # webbrowser.Error, OSError: the link is printed anyway
            log.warning("cannot open a browser (%s): open the console's link yourself", e)
            return
        if not opened:
            log.warning("no browser found here: open the console's link yourself")

    print("  opening the console in this computer's browser", file=out)
    threading.Thread(target=go, name="open-console", daemon=True).start()


def serve(config: Config, host: str | None = None, port: int | None = None,
          open_console: bool = False) -> int:
    h = host or config.server.host
    p = port or config.server.port
    lock = lock_journal(config.journal_dir, p)
    try:
        https = https_for(config, h)
    except StartupError:
        lock.close()
        raise
    cluster = None
    operator_token = None
    if config.cluster.bus:
        # one process of a cluster (README: the association's server): what every process
        # must agree on first, then the hall's channels are started as their leases are taken
        from cluster.service import share_secrets

        try:
            shared = share_secrets(config, config.cluster.bus)
        except ConnectionError as e:
            lock.close()
            raise StartupError(f"{e}: start the broker first (nats-server -js), or check "
                               "cluster.bus / --bus") from None
        operator_token = None if config.server.security.operator_token else \
            shared["operator-token"]
    # the door's caps are sized from the open-files limit, raised first where allowed
    open_files = raise_open_files()
    doors, _backlog = make_doors(config, open_files)
    options = uvicorn_options(config, open_files, doors, tls=https.context)
    sock = bind(h, p, options["backlog"])
    bound = int(sock.getsockname()[1])
    if config.cluster.bus:
        from cluster.service import joined, node_name

        cluster = joined(config, config.cluster.bus, node_name(),
                         advertised(h, bound, config.cluster.advertise, https.scheme))

    def ready(hall: Hall, token: str, generated: bool) -> None:
        # at the end of start-up, so the threads and workers started meanwhile keep `nice`
        hall.scheduling = realtime_loop(config.server.realtime_priority)
        bases = candidates(h, bound, config.server.public_url, scheme=https.scheme)
        local = local_base(h, bound, https)
        banner(hall, bases, token, generated, https=https, local=local)
        if open_console:
            open_console_page(f"{local or bases[0].base}/console#token={token}")

    with contextlib.suppress(OSError):  # not permitted: ordinary priority
        os.setpriority(os.PRIO_PROCESS, 0, config.server.nice)
    # a thread of ours that keeps the GIL (loading a clip, a collection) lets the event loop in
    # after 1 ms rather than 5: a hold waits that much less
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
    app = create_app(config, on_ready=ready, listen=(h, bound), operator_token=operator_token,
                     cluster=cluster, doors=doors, https=https)
    # no per-message compression: on a hall's LAN it costs more CPU than it saves, and it
    # would make each phone's frame different (hall/hub.py writes one frame to all)
    # (the WebSocket protocol is the door's subclass of uvicorn's sans-I/O one: api/serverglue.py)
    ucfg = uvicorn.Config(app, log_level="info", ws_max_size=65536,
                          ws_per_message_deflate=False, **options)
    for name in ("uvicorn.access", "uvicorn.error", "uvicorn"):
        logging.getLogger(name).addFilter(RedactSecrets())
    try:
        uvicorn.Server(ucfg).run(sockets=[sock])
    finally:
        sock.close()
        lock.close()
    return 0
