"""From an algorithm config (built-in name, registered name, or ``className`` + ``codeDirectory``) to a tuner or
assessor object; and the config-load check that refuses what could not be built.

``algo`` is duck-typed: anything with ``name``, ``class_name``, ``code_directory`` and ``class_args`` (the config
package's ``AlgorithmConfig``). Built-in classArgs defaults are the constructors' own (NNI's defaults, e.g. TPE
minimizes while Evolution maximizes).
"""

from __future__ import annotations

import inspect
from typing import Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning import plugins, user_algorithms
from trialfleet.tuning.base import Assessor, BuiltinTuner, Tuner
from trialfleet.tuning.catalog import (
    BUILTIN_ASSESSORS,
    BUILTIN_TUNERS,
    BuiltinAlgorithm,
    builtins_of,
    find_builtin,
    refuse_not_offered,
)
from trialfleet.tuning.foreign import ForeignAssessor, ForeignTuner
from trialfleet.tuning.loader import check_arg_names, instantiate, load_class

__all__ = [
    "BUILTIN_ASSESSORS",
    "BUILTIN_TUNERS",
    "check_algorithm",
    "create_assessor",
    "create_tuner",
    "ignored_assessor_warning",
]


def check_algorithm(algo: Any, kind: str, search_space: Any = None) -> None:
    """Raise AlgorithmError (or SearchSpaceError) for an algorithm config that cannot run.

    Built-ins are fully checked (name, installed requirements, classArgs, search space); custom classes are
    not imported here, only their code directory is checked; registered names must exist.
    """
    builtins_of(kind)  # rejects a bad kind
    if kind == "advisor" and getattr(algo, "class_name", None):
        raise AlgorithmError(
            "custom advisors (NNI MsgDispatcherBase subclasses) are not supported: give a custom tuner, or "
            "the built-in advisors Hyperband or BOHB"
        )
    if getattr(algo, "class_name", None):
        directory = getattr(algo, "code_directory", None)
        if directory is not None and not _is_dir(directory):
            raise AlgorithmError(f"{kind} codeDirectory {directory} is not a directory")
        return
    entry = _resolve(_name_of(algo, kind), kind)
    if isinstance(entry, BuiltinAlgorithm):
        instance = _build_builtin(entry, _class_args(algo))
        if isinstance(instance, BuiltinTuner):
            instance.check_search_space(search_space)


def create_tuner(algo: Any, search_space: Any) -> Tuner:
    """Build the tuner and give it the search space (``update_search_space``), ready to propose.

    Exceptions raised by a custom tuner's own code propagate unchanged.
    """
    tuner = _create(algo, "tuner")
    if not isinstance(tuner, Tuner):
        tuner = ForeignTuner(tuner)
    tuner.update_search_space(search_space)
    return tuner


def create_assessor(algo: Any) -> Assessor:
    assessor = _create(algo, "assessor")
    return assessor if isinstance(assessor, Assessor) else ForeignAssessor(assessor)


def ignored_assessor_warning(tuner: Any, assessor: Any) -> str | None:
    """The warning to give when an assessor is configured with a built-in advisor, which NNI then ignores."""
    if assessor is None or getattr(tuner, "class_name", None):
        return None
    name = getattr(tuner, "name", None)
    entry = find_builtin(name, "advisor") if isinstance(name, str) else None
    if entry is None:
        return None
    return (
        f"the assessor is ignored: tuner {entry.name} is an advisor, it decides how long each trial runs "
        "(its TRIAL_BUDGET), as in NNI"
    )


def _create(algo: Any, kind: str) -> Any:
    args = _class_args(algo)
    class_name = getattr(algo, "class_name", None)
    if class_name:
        cls = load_class(class_name, getattr(algo, "code_directory", None), kind)
        return instantiate(cls, args, f"{kind} {class_name}")
    entry = _resolve(_name_of(algo, kind), kind)
    if isinstance(entry, BuiltinAlgorithm):
        return _build_builtin(entry, args)
    cls = load_class(entry["className"], entry.get("codeDirectory"), kind)
    return instantiate(cls, args, f"{kind} {entry['builtinName']}")


def _resolve(name: str, kind: str) -> BuiltinAlgorithm | dict[str, Any]:
    entry = find_builtin(name, kind)
    if entry is not None:
        return entry
    if kind != "advisor":
        found = user_algorithms.lookup(name, kind) or plugins.lookup(name, kind)
        if found is not None:
            return found
    available = _available_names(kind)
    refuse_not_offered(name, kind, available)
    raise AlgorithmError(f"unknown {kind} '{name}'. Available {kind}s: {', '.join(available)}")


def _build_builtin(entry: BuiltinAlgorithm, args: dict[str, Any]) -> Any:
    missing = entry.missing_requirements()
    if missing:
        raise AlgorithmError(
            f"{entry.kind} {entry.name} is built on {entry.library} and needs the Python package(s) "
            f"{', '.join(missing)}, which are not installed ({entry.install})"
        )
    cls = entry.load()
    label = f"{entry.kind} {entry.name}"
    args = _drop_unused_optimize_mode(cls, args, label)
    check_arg_names(cls, args, label)
    return instantiate(cls, args, label)


def _drop_unused_optimize_mode(cls: type, args: dict[str, Any], label: str) -> dict[str, Any]:
    """NNI configs pass ``optimize_mode`` to every tuner by habit; one that has no use for it (Random, Grid,
    Batch) accepts a valid value and ignores it instead of refusing the whole experiment."""
    if "optimize_mode" not in args or "optimize_mode" in inspect.signature(cls).parameters:
        return args
    if args["optimize_mode"] not in ("maximize", "minimize"):
        raise AlgorithmError(
            f"{label}: optimize_mode must be 'maximize' or 'minimize', got {args['optimize_mode']!r}"
        )
    return {k: v for k, v in args.items() if k != "optimize_mode"}


def _available_names(kind: str) -> list[str]:
    names = [entry.name for entry in builtins_of(kind)]
    if kind == "advisor":
        return names
    return names + [
        info.name
        for info in user_algorithms.list_algorithms()
        if info.kind == kind and info.source != "builtin"
    ]


def _name_of(algo: Any, kind: str) -> str:
    name = getattr(algo, "name", None)
    if not isinstance(name, str) or not name:
        raise AlgorithmError(f"{kind}: set name (a built-in or registered algorithm) or className")
    return name


def _class_args(algo: Any) -> dict[str, Any]:
    args = getattr(algo, "class_args", None) or {}
    if not isinstance(args, dict):
        raise AlgorithmError(f"classArgs must be a mapping, got {args!r}")
    return dict(args)


def _is_dir(path: Any) -> bool:
    from pathlib import Path

    return Path(path).is_dir()
