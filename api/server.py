"""`yomite serve`: the hall service on uvicorn, with its URLs, PINs and a QR code printed for the
operator."""

import contextlib
import logging
import os
import re
import socket
import sys
from typing import TextIO

import uvicorn

from reader.config import Config

from .app import create_app
from .hall import Hall


def lan_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback (from the resolver: no traffic)."""
    found: list[str] = []
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addr = str(info[4][0])
            if not addr.startswith("127.") and addr not in found:
                found.append(addr)
    except OSError:
        pass
    return found


def banner(hall: Hall, host: str, port: int, token: str, generated: bool,
           out: TextIO = sys.stdout) -> None:
    shown = host if host not in ("0.0.0.0", "::", "") else (lan_addresses() or ["127.0.0.1"])[0]
    base = f"http://{shown}:{port}"
    print(f"\nyomite is serving on {base}", file=out)
    print(f"  operator console: {base}/console#token={token}", file=out)
    if generated:
        print("  (operator token generated for this run; set server.security.operator_token "
              "in config.yaml to keep one)", file=out)
    for name, svc in hall.channels.items():
        join = f"{base}/referee/{name}?pin={svc.pin}"
        print(f"  channel {name}: audio -> {svc.audio}", file=out)
        print(f"    referees: {join}   (PIN {svc.pin})", file=out)
        print(f"    projector: {base}/display/{name}", file=out)
    first = next(iter(hall.channels.values()))
    try:
        import qrcode

        qr = qrcode.QRCode(border=1)
        qr.add_data(f"{base}/referee/{first.name}?pin={first.pin}")
        print(f"\n  scan to referee channel {first.name}:", file=out)
        qr.print_ascii(out=out, invert=True)
    except Exception as e:  # the QR is a convenience: never a reason not to serve
        print(f"  (no terminal QR code: {e})", file=out)
    out.flush()


class RedactSecrets(logging.Filter):
    """Access logs print request lines: a WebSocket's `?token=` and a join link's `?pin=`
    must never reach them."""

    PATTERN = re.compile(r"((?:token|pin)=)[^&\s\"']+")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(
                self.PATTERN.sub(r"\1***", a) if isinstance(a, str) else a
                for a in (record.args if isinstance(record.args, tuple) else (record.args,))
            )
        if isinstance(record.msg, str):
            record.msg = self.PATTERN.sub(r"\1***", record.msg)
        return True


def serve(config: Config, host: str | None = None, port: int | None = None) -> int:
    h = host or config.server.host
    p = port or config.server.port

    def ready(hall: Hall, token: str, generated: bool) -> None:
        banner(hall, h, p, token, generated)

    with contextlib.suppress(OSError):  # not permitted: ordinary priority
        os.setpriority(os.PRIO_PROCESS, 0, config.server.nice)
    # a thread of ours that keeps the GIL (loading a clip, a collection) lets the event loop in
    # after 1 ms rather than 5: a hold waits that much less
    sys.setswitchinterval(min(sys.getswitchinterval(), 0.001))
    app = create_app(config, on_ready=ready)
    # no per-message compression: on a hall's LAN it costs more CPU than it saves, and it
    # would make each phone's frame different (api/hub.py writes one frame to all)
    ucfg = uvicorn.Config(app, host=h, port=p, log_level="info", ws_max_size=65536,
                          ws="websockets-sansio", ws_per_message_deflate=False)
    for name in ("uvicorn.access", "uvicorn.error", "uvicorn"):
        logging.getLogger(name).addFilter(RedactSecrets())
    uvicorn.Server(ucfg).run()
    return 0
