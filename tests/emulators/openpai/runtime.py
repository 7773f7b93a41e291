"""The PAI runtime, the part of it a job can observe.

In a PAI container the runtime (microsoft/openpai-runtime) runs the task's rendered command as ``user.sh``, a
bash script that starts with ``set -o errexit``, ``nounset`` and ``pipefail``, and keeps its stdout, stderr and
both interleaved in the log directories the log manager serves (``user-stdout``, ``user-stderr``, ``user-all``).
When the command fails, the runtime's exit handler matches the exit code and the tail of the log against the
exit spec's runtime patterns: the container then exits with the matched code (``220`` for "command not found",
``232`` for an ``ImportError``, ``137`` for a SIGKILL, ...) or ``255`` when nothing matches, and leaves a
``[PAI_RUNTIME_ERROR_START]`` YAML summary as the container's termination message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .exit_spec import runtime_patterns

USER_SH_HEADER = "#!/bin/bash\n\nset -o errexit\nset -o nounset\nset -o pipefail\n\n# user's commands here\n"

# runtime_entry.sh reduced to its logging: $1 is the pod's log directory, $2 the user script
ENTRY_SH = r"""
LOG_DIR="$1"
log() { printf '%s %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S')" "$1" >> "$LOG_DIR/runtime.log"; }
log "[INFO] USER COMMAND START"
exec {out}> >(tee -a "$LOG_DIR/user-stdout/current" >> "$LOG_DIR/user-all/current"); out_pid=$!
exec {err}> >(tee -a "$LOG_DIR/user-stderr/current" >> "$LOG_DIR/user-all/current"); err_pid=$!
/bin/bash "$2" >&"$out" 2>&"$err"
code=$?
exec {out}>&- {err}>&-
wait "$out_pid" "$err_pid" 2>/dev/null
log "[INFO] USER COMMAND END"
exit "$code"
"""

DEFAULT_EXIT_CODE = 255
MAX_SEARCH = 10 * 1024 * 1024
MAX_AGGREGATE = 4096 - len("[PAI_RUNTIME_ERROR_START]") - len("[PAI_RUNTIME_ERROR_END]")
MAX_USER_LINES = 15
MAX_RUNTIME_LINES = 10
MAX_MATCH = 2048


def prepare(pod_dir: Path, command: str) -> list[str]:
    """Writes the pod's scripts and log directories; returns the container's command."""
    for name in ("user-stdout", "user-stderr", "user-all"):
        (pod_dir / name).mkdir(parents=True, exist_ok=True)
        (pod_dir / name / "current").touch()
    (pod_dir / "runtime.log").touch()
    (pod_dir / "user.sh").write_text(USER_SH_HEADER + command)
    (pod_dir / "runtime_entry.sh").write_text(ENTRY_SH)
    return ["/bin/bash", str(pod_dir / "runtime_entry.sh"), str(pod_dir), str(pod_dir / "user.sh")]


@dataclass(frozen=True)
class ExitInfo:
    container_code: int
    message: str | None  # the termination message


def _tail(path: Path, size: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            length = handle.tell()
            handle.seek(max(0, length - size))
            return handle.read()
    except OSError:
        return b""


def _tail_lines(content: bytes, count: int) -> str:
    text = content[-MAX_AGGREGATE:].decode(errors="replace").replace("\r\n", "\n")
    return "\n".join(text.split("\n")[-count:])


def exit_info(user_code: int, pod_dir: Path) -> ExitInfo:
    """The runtime's exit handler for the user command's exit code."""
    if user_code == 0:
        return ExitInfo(0, None)
    user_log = _tail(pod_dir / "user-all" / "current", MAX_SEARCH)
    runtime_log = _tail(pod_dir / "runtime.log", MAX_SEARCH)
    code, matched = DEFAULT_EXIT_CODE, None
    for pattern in runtime_patterns():
        if pattern.exit_code is not None and pattern.exit_code != user_code:
            continue
        if pattern.needs_platform_log:  # the runtime's own log never holds the platform errors looked for
            continue
        match = pattern.user_log_regex.search(user_log) if pattern.user_log_regex is not None else None
        if pattern.user_log_regex is not None and match is None:
            continue
        code = pattern.container_exit_code
        matched = match.group(0)[:MAX_MATCH].decode(errors="replace") if match is not None else None
        break
    summary: dict[str, object] = {"exitCode": code, "originUserExitCode": user_code}
    if matched is not None:
        summary["matchedUserLogString"] = matched
    user_lines = _tail_lines(user_log, MAX_USER_LINES)
    summary["errorLogs"] = {"user": user_lines, "platform": _tail_lines(runtime_log, MAX_RUNTIME_LINES)}
    message = _message(summary)
    if len(message.encode()) > 4096:  # a termination message holds 4 KiB: the user's lines give way
        excess = len(message.encode()) - 4096
        summary["errorLogs"] = {"user": user_lines[excess + 16 :], "platform": _tail_lines(runtime_log, 1)}
        message = _message(summary)
    return ExitInfo(code, message)


def _message(summary: dict[str, object]) -> str:
    body = yaml.safe_dump(summary, sort_keys=False, allow_unicode=True, width=4096)
    return "\n".join(["[PAI_RUNTIME_ERROR_START]", body, "[PAI_RUNTIME_ERROR_END]"])


__all__ = ["ENTRY_SH", "USER_SH_HEADER", "ExitInfo", "exit_info", "prepare"]
