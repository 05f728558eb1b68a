"""The cluster's part of the `yomite` command: `serve --bus URL` and `--bus-insecure`, the
check made before a process joins (cluster.preflight: a broker anyone may use, a missing or
wrong key, refused with exit 2 and what to configure), and `yomite cluster-key FILE`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from hall.config import Config
from yomite.startup import StartupError


def add_serve_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--bus", default=None, metavar="URL",
                   help="join a cluster through this NATS broker (nats://host:4222; default "
                   "cluster.bus): README, the association's server")
    s.add_argument("--bus-insecure", action="store_true",
                   help="join a broker that lets anyone in (no credentials, no sealing key "
                   "needed): for one machine whose broker listens on 127.0.0.1 only "
                   "(cluster.insecure; docs/cluster-security.md)")


def add_commands(sub: Any) -> None:
    ck = sub.add_parser("cluster-key", help="make a cluster's sealing key file",
                        description="A new key (32 random bytes, hex) in FILE, readable by you "
                        "only: what a cluster keeps on its broker is sealed with it "
                        "(cluster.secret_key_file, the same file on every process). An "
                        "existing file is never replaced.")
    ck.add_argument("file", metavar="FILE")
    ck.set_defaults(func=cmd_cluster_key)


def overrides(cfg: Config, args: argparse.Namespace) -> dict[str, object]:
    """The config's `cluster` as --bus and --bus-insecure change it ({}: unchanged)."""
    cluster: dict[str, object] = {}
    if getattr(args, "bus", None):
        cluster["bus"] = args.bus
    if getattr(args, "bus_insecure", False):
        cluster["insecure"] = True
    return {"cluster": cfg.cluster.model_copy(update=cluster)} if cluster else {}


def check(cfg: Config) -> None:
    """Before joining a cluster (nothing without one): StartupError (exit 2) naming what to
    configure; the warnings (--bus-insecure away from loopback, a bus without TLS across a
    network) on stderr, apart, where whoever starts it reads them and a service's log keeps
    them."""
    if not cfg.cluster.bus:
        return
    from cluster.access import AccessError
    from cluster.preflight import check_broker

    try:
        warnings = asyncio.run(check_broker(cfg.cluster.bus, cfg.cluster))
    except AccessError as e:
        raise StartupError(str(e)) from None
    for w in warnings:
        print(f"\n  WARNING: {w}\n", file=sys.stderr, flush=True)


def cmd_cluster_key(args: argparse.Namespace) -> int:
    from cluster.seal import write_key_file

    path = Path(args.file)
    try:
        kid = write_key_file(path)
    except FileExistsError:
        print(f"yomite: {path} exists: not replaced (what was sealed with its key would never "
              "open again)", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"yomite: cannot write {path}: {e}", file=sys.stderr)
        return 2
    print(f"a new cluster key in {path} (id {kid}), readable by you only: copy it to every "
          "process of the cluster (as securely as a password) and name it in "
          "cluster.secret_key_file")
    return 0
