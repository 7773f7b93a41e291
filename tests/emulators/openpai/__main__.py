"""Run the OpenPAI emulator on its own: ``python -m tests.emulators.openpai --port 8080 --storage /tmp/nfs``.

It prints what goes into an NNI OpenPAI config (host, username, token, storageConfigName and the two mount
points) and serves until interrupted. ``--storage DIR`` is the directory behind the default storage
(``confignfs``): NNI's ``localStorageMountPoint``; tasks see it at ``/mnt/confignfs``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from . import DEFAULT_STORAGE, OpenPAIEmulator
from .config import DEFAULT_DELAYS, ClusterConfig, Limits, Storage, Timing, User, VirtualCluster


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.emulators.openpai", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--storage", type=Path, help="host directory behind the default storage")
    parser.add_argument("--storage-name", default=DEFAULT_STORAGE)
    parser.add_argument("--user", default="alice", help="the user whose token is printed")
    parser.add_argument("--password", default="openpai-password")
    parser.add_argument(
        "--token", help="a bearer token of the user that never expires, printed (default: a new JWT)"
    )
    parser.add_argument("--delay", type=float, default=0.5, help="seconds each FC state lasts at least")
    parser.add_argument(
        "--scheduling-latency",
        type=float,
        default=None,
        help="seconds every job waits in the queue before it runs (the scheduling-latency knob)",
    )
    parser.add_argument(
        "--submit-per-hour", type=int, default=60, help="job submissions per user and hour (0: off)"
    )
    parser.add_argument(
        "--vc", action="append", default=[], metavar="NAME:CPU:MEMORY_MB:GPU", help="a virtual cluster"
    )
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> ClusterConfig:
    clusters = [VirtualCluster(*_vc_fields(spec)) for spec in args.vc] or [VirtualCluster("default")]
    names = [vc.name for vc in clusters]
    users = [
        User("admin", admin=True, virtual_clusters=names),
        User(args.user, args.password, virtual_clusters=names, tokens=[args.token] if args.token else []),
    ]
    storages = [Storage(args.storage_name, args.storage.resolve())] if args.storage else []
    delays = {state: args.delay for state in DEFAULT_DELAYS}
    if args.scheduling_latency is not None:
        delays["AttemptCreationPending"] = args.scheduling_latency
    return ClusterConfig(
        users=users,
        virtual_clusters=clusters,
        storages=storages,
        limits=Limits(submit_job_per_hour=args.submit_per_hour),
        timing=Timing(delays=delays),
    )


def _vc_fields(spec: str) -> tuple[str, int, int, int]:
    name, cpu, memory, gpu = spec.split(":")
    return name, int(cpu), int(memory), int(gpu)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.storage:
        args.storage.mkdir(parents=True, exist_ok=True)
    emulator = OpenPAIEmulator(build_config(args), host=args.host, port=args.port).start()
    done = threading.Event()
    for signo in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signo, lambda *_: done.set())
    config = emulator.nni_config(args.user, args.storage_name) | ({"token": args.token} if args.token else {})
    print(f"OpenPAI emulator (REST server v2) at {emulator.url}/rest-server/api/v2", flush=True)
    print("NNI trainingService settings:")
    for key in ("platform", "host", "username", "token", "storageConfigName"):
        print(f"  {key}: {config[key]}")
    if args.storage:
        print(f"  localStorageMountPoint: {config['localStorageMountPoint']}")
        print(f"  containerStorageMountPoint: {config['containerStorageMountPoint']}")
    print(
        f"users: admin (admin) and {args.user}, password {args.password!r} (POST /rest-server/api/v2/authn/basic/login)"
    )
    print(f"control API: {emulator.url}/_emu/ ; Ctrl-C to stop", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
