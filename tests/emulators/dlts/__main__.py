"""``python -m tests.emulators.dlts --port P --storage DIR``: run the DLTS emulator until interrupted.

It prints what an NNI DLTS config (``dltsConfig``) needs, the master token behind the password, and which host
directory the jobs' ``/work`` and ``/data`` are.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from tests.emulators.dlts import DltsEmulator
from tests.emulators.dlts.config import DEFAULT_DELAYS


def _delay(text: str) -> tuple[str, float]:
    state, _, seconds = text.partition("=")
    if state not in DEFAULT_DELAYS or not seconds:
        raise argparse.ArgumentTypeError(f"expected STATE=SECONDS with STATE one of {sorted(DEFAULT_DELAYS)}")
    return state, float(seconds)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.emulators.dlts", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="dashboard port (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--storage", type=Path, required=True, help="host directory standing in for the NFS export"
    )
    parser.add_argument("--cluster", default="emu-cluster")
    parser.add_argument("--team", default="platform")
    parser.add_argument("--email", default="trialfleet@example.com")
    parser.add_argument("--master-token", default=None, help="the dashboard's masterToken (default: random)")
    parser.add_argument("--delay", type=_delay, action="append", default=[], metavar="STATE=SECONDS")
    parser.add_argument(
        "--no-wait-for-poll", action="store_true", help="let jobs leave a state even if no client has read it"
    )
    parser.add_argument(
        "--scheduling-latency",
        type=float,
        default=None,
        help="seconds every job waits in the queue before it runs (the scheduling-latency knob)",
    )
    parser.add_argument("--log-backend", choices=("elasticsearch", "legacy"), default="elasticsearch")
    return parser.parse_args(argv)


def banner(dlts: DltsEmulator) -> str:
    return "\n".join(
        [
            f"DLTS dashboard emulator listening on {dlts.url}",
            "",
            "NNI config (trainingServicePlatform: dlts):",
            "dltsConfig:",
            f"  dashboard: {dlts.url}",
            f"  cluster: {dlts.cluster}",
            f"  team: {dlts.team}",
            f"  email: {dlts.email}",
            f"  password: {dlts.password}",
            "",
            f"password = md5('{dlts.email}:<masterToken>'), masterToken: {dlts.master_token}",
            f"jobs' /work and /home/<alias> (default workPath): {dlts.work_dir()}",
            f"jobs' /job: {dlts.storage / 'work'}/<jobPath>; /data: {dlts.data_dir()}",
            f"control API: {dlts.url}_emu/config",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    dlts = DltsEmulator(
        args.storage,
        cluster=args.cluster,
        team=args.team,
        email=args.email,
        master_token=args.master_token,
        delays=dict(args.delay)
        | ({"queued": args.scheduling_latency} if args.scheduling_latency is not None else {}),
        wait_for_poll=not args.no_wait_for_poll,
        log_backend=args.log_backend,
        host=args.host,
        port=args.port,
    )
    done = threading.Event()
    for signo in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signo, lambda *_: done.set())
    dlts.start()
    try:
        print(banner(dlts), flush=True)
        done.wait()
    finally:
        dlts.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
