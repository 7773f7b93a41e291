"""Importing and building custom tuner/assessor classes (``className`` + ``codeDirectory``, or registered)."""

from __future__ import annotations

import importlib
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any

from trialfleet.errors import AlgorithmError


def load_class(class_name: str, code_directory: str | Path | None, kind: str) -> type:
    """Import ``module.Class``, with ``code_directory`` first on sys.path and ``import nni`` working."""
    _ensure_nni_importable()
    if code_directory is not None:
        directory = str(Path(code_directory).resolve())
        if not Path(directory).is_dir():
            raise AlgorithmError(f"{kind} codeDirectory {directory} is not a directory")
        if directory not in sys.path:
            sys.path.insert(0, directory)
    module_name, _, attr = class_name.rpartition(".")
    if not module_name:
        raise AlgorithmError(f"{kind} className must look like 'module.Class', got {class_name!r}")
    where = f" from {code_directory}" if code_directory is not None else ""
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:
        raise AlgorithmError(f"cannot import {kind} class '{class_name}'{where}: {_last_line(exc)}") from exc
    if not inspect.isclass(cls):
        raise AlgorithmError(f"{kind} className '{class_name}' is not a class")
    return cls


def instantiate(cls: type, class_args: dict[str, Any], label: str) -> Any:
    """``cls(**class_args)``; a failing constructor becomes an AlgorithmError naming the algorithm."""
    try:
        return cls(**class_args)
    except AlgorithmError:
        raise
    except Exception as exc:
        raise AlgorithmError(
            f"cannot create {label} with classArgs {class_args!r}: {_last_line(exc)}"
        ) from exc


def check_arg_names(cls: type, class_args: dict[str, Any], label: str) -> None:
    """Refuse classArgs the constructor does not take, listing the ones it does."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return  # the class checks its own extra arguments
    accepted = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(class_args) - set(accepted))
    if unknown:
        raise AlgorithmError(
            f"{label}: unknown classArgs {', '.join(unknown)} (accepted: {', '.join(accepted) or 'none'})"
        )


def _ensure_nni_importable() -> None:
    # custom algorithms written for NNI do `from nni.tuner import Tuner`; the shim answers when NNI is absent
    from trialfleet.compat import ensure_nni_importable

    ensure_nni_importable()


def _last_line(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()
