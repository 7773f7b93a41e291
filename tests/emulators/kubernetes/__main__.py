"""Run the Kubernetes emulator on its own: ``python -m tests.emulators.kubernetes --port 6443 --volumes DIR``.

It writes a kubeconfig, prints how to use it, and serves until interrupted (Ctrl-C or SIGTERM). NFS exports
are ``DIR/nfs/<server>/<path>``, Azure file shares ``DIR/azurefile/<share>``, claims ``DIR/pvc/<ns>/<claim>``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from . import ALL_OPERATORS, KubernetesEmulator, NodeConfig


def _node(text: str) -> NodeConfig:
    """``name[:cpu[:memory[:gpus]]]``, e.g. ``gpu-1:16:64Gi:4``."""
    name, *rest = text.split(":")
    fields = dict(zip(("cpu", "memory", "gpus"), rest, strict=False))
    return NodeConfig(
        name, cpu=fields.get("cpu", "8"), memory=fields.get("memory", "32Gi"), gpus=int(fields.get("gpus", 0))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.emulators.kubernetes", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--volumes", type=Path, required=True, help="directory for NFS exports, shares, claims and state"
    )
    parser.add_argument("--token", default="emulator-token", help="the bearer token clients must send")
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="accept requests without a token (kubectl and client-go send tokens over TLS only)",
    )
    parser.add_argument(
        "--operators", default=",".join(ALL_OPERATORS), help="operators to install (comma separated)"
    )
    parser.add_argument("--node", action="append", type=_node, help="name[:cpu[:memory[:gpus]]] (repeatable)")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds each state stays visible at least")
    parser.add_argument(
        "--scheduling-latency",
        type=float,
        default=None,
        help="seconds every job waits in the queue before it runs (the scheduling-latency knob)",
    )
    args = parser.parse_args(argv)

    emulator = KubernetesEmulator(
        args.volumes,
        host=args.host,
        port=args.port,
        token=None if args.no_auth else args.token,
        delay=args.delay,
        schedule_delay=args.scheduling_latency,
        operators=[name for name in args.operators.split(",") if name],
        nodes=args.node or [NodeConfig("node-1", gpus=1)],
    )
    emulator.start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print(f"Kubernetes emulator listening on {emulator.url}")
    print(f"kubeconfig: {emulator.kubeconfig}")
    print(f"  export KUBECONFIG={emulator.kubeconfig}")
    print(
        f"NFS exports: {args.volumes / 'nfs'}/<server>/<path>   Azure shares: {args.volumes / 'azurefile'}/<share>"
    )
    print(f"control API: {emulator.url}/_emu/state")
    sys.stdout.flush()
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
