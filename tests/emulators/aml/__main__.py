"""Run the AML emulator on its own: ``python -m tests.emulators.aml --port P`` (from the repository root).

It prints what a user needs: the workspace coordinates and compute targets for an NNI ``aml`` config, the CA bundle,
the service principal and the environment variables for the SDK, and ``cloud``/``cloud_metadata`` for ``MLClient``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import threading
from pathlib import Path

from .emulator import AmlEmulator
from .jobs import Timing
from .workspace import WorkspaceConfig


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.emulators.aml", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="HTTPS port on 127.0.0.1 (0: a free one)")
    parser.add_argument(
        "--root", type=Path, default=None, help="state directory (default: a new temporary one)"
    )
    parser.add_argument("--subscription", default=WorkspaceConfig.subscription_id)
    parser.add_argument("--resource-group", default=WorkspaceConfig.resource_group)
    parser.add_argument("--workspace", default=WorkspaceConfig.workspace_name)
    parser.add_argument("--compute", action="append", default=None, help="a compute target name (repeatable)")
    parser.add_argument(
        "--state-delay", type=float, default=Timing.state_delay, help="least seconds in each job state"
    )
    parser.add_argument(
        "--scheduling-latency",
        type=float,
        default=0.0,
        help="seconds every job waits in the queue before it runs (the scheduling-latency knob)",
    )
    parser.add_argument("--json", action="store_true", help="print the connection details as one JSON object")
    parser.add_argument(
        "--env-file",
        type=Path,
        default=None,
        help="also write the client's variables there, as `export` lines",
    )
    return parser.parse_args(argv)


def _describe(emulator: AmlEmulator) -> str:
    info = emulator.info()
    exports = "\n".join(f"  export {key}={value}" for key, value in info["env"].items())
    metadata = json.dumps(info["cloudMetadata"], indent=4)
    return f"""AML emulator listening on {info["url"]}

NNI / trialfleet aml config:
  subscriptionId: {info["subscriptionId"]}
  resourceGroup:  {info["resourceGroup"]}
  workspaceName:  {info["workspaceName"]}
  computeTarget:  {" | ".join(info["computes"])}

CA bundle: {info["caBundle"]}
Service principal: tenant {info["tenantId"]}, client {info["clientId"]}, secret {info["clientSecret"]}

Environment for a client process (azure-identity's EnvironmentCredential reads the AZURE_* ones;
pass disable_instance_discovery=True to it):
{exports}

MLClient(credential, "{info["subscriptionId"]}", "{info["resourceGroup"]}", "{info["workspaceName"]}",
         cloud="{info["cloudName"]}", cloud_metadata={metadata})

MLflow tracking URI (https form of the workspace's azureml:// URI): {info["mlflowTrackingUri"]}
Control API: {info["url"]}/_emu/info, /_emu/requests, /_emu/faults, /_emu/jobs
"""


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    defaults = WorkspaceConfig()
    config = WorkspaceConfig(
        subscription_id=args.subscription,
        resource_group=args.resource_group,
        workspace_name=args.workspace,
        computes=tuple(args.compute) if args.compute else defaults.computes,
    )
    if args.root:
        args.root.mkdir(parents=True, exist_ok=True)
    emulator = AmlEmulator(
        args.root,
        config=config,
        timing=Timing(state_delay=args.state_delay, queue_latency=args.scheduling_latency),
        port=args.port,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with emulator:
        if args.env_file:
            exports = (f"export {key}={shlex.quote(value)}\n" for key, value in emulator.client_env().items())
            args.env_file.write_text("".join(exports))
        print(json.dumps(emulator.info()) if args.json else _describe(emulator), flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
