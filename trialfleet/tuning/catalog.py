"""The built-in tuners and assessors, and NNI's built-in names that trialfleet does not offer.

Names match case-insensitively on the name or an alias, as in NNI. Each entry points at its class by import
path, so reading the table imports no algorithm (and never Optuna).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trialfleet.errors import AlgorithmError


@dataclass(frozen=True)
class BuiltinAlgorithm:
    name: str
    kind: str  # "tuner" | "assessor"
    target: str  # "module:Class"
    library: str  # what the algorithm is built on
    aliases: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # modules that must be importable, beyond trialfleet's own dependencies

    def matches(self, name: str) -> bool:
        return name.lower() in (n.lower() for n in (self.name, *self.aliases))

    def load(self) -> type:
        module, _, attr = self.target.partition(":")
        cls: type = getattr(importlib.import_module(module), attr)
        return cls

    @property
    def default_args(self) -> dict[str, Any]:
        """The classArgs a config may set, with their defaults (from the constructor)."""
        params = inspect.signature(self.load()).parameters.values()
        return {p.name: p.default for p in params if p.kind is p.POSITIONAL_OR_KEYWORD}

    @property
    def space_types(self) -> frozenset[str]:
        """The search-space types the tuner accepts (empty for assessors)."""
        return frozenset(getattr(self.load(), "space_types", ()))

    def missing_requirements(self) -> list[str]:
        return [module for module in self.requires if importlib.util.find_spec(module) is None]


_HERE = "trialfleet.tuning"
_OPTUNA = ("optuna",)

BUILTIN_TUNERS: tuple[BuiltinAlgorithm, ...] = (
    BuiltinAlgorithm(
        "TPE", "tuner", f"{_HERE}.optuna_algorithms:TpeTuner", "optuna TPESampler", requires=_OPTUNA
    ),
    BuiltinAlgorithm("Random", "tuner", f"{_HERE}.random_tuner:RandomTuner", "trialfleet", ("RandomTuner",)),
    BuiltinAlgorithm(
        "Anneal", "tuner", f"{_HERE}.anneal_tuner:AnnealTuner", "trialfleet (hyperopt's anneal)"
    ),
    BuiltinAlgorithm(
        "Evolution",
        "tuner",
        f"{_HERE}.optuna_algorithms:EvolutionTuner",
        "optuna NSGAIISampler",
        requires=_OPTUNA,
    ),
    BuiltinAlgorithm("Batch", "tuner", f"{_HERE}.batch_tuner:BatchTuner", "trialfleet", ("BatchTuner",)),
    BuiltinAlgorithm(
        "GridSearch", "tuner", f"{_HERE}.gridsearch_tuner:GridSearchTuner", "trialfleet", ("GridSearchTuner",)
    ),
    BuiltinAlgorithm(
        "GP",
        "tuner",
        f"{_HERE}.optuna_algorithms:GPTuner",
        "optuna GPSampler (needs PyTorch)",
        ("GPTuner",),
        requires=(*_OPTUNA, "torch"),
    ),
)

BUILTIN_ASSESSORS: tuple[BuiltinAlgorithm, ...] = (
    BuiltinAlgorithm("Medianstop", "assessor", f"{_HERE}.medianstop:MedianstopAssessor", "trialfleet"),
)

# NNI built-in names that are not offered, with why; a config naming one fails at load (never a substitute).
NOT_OFFERED: dict[str, tuple[tuple[str, ...], str]] = {
    "TPE_legacy": ((), "it is hyperopt's TPE; use TPE"),
    "SMAC": ((), "it needs SMAC3, which trialfleet does not bundle; register your own with `algo register`"),
    "NetworkMorphism": ((), "it is a NAS tuner, out of trialfleet's HPO scope"),
    "Metis": (("MetisTuner",), "no maintained implementation; GP covers the same numeric spaces"),
    "PBT": (("PBTTuner",), "population-based training needs checkpoint hand-over between trials"),
    "RegularizedEvolutionTuner": ((), "it is a NAS tuner; Evolution covers HPO spaces"),
    "DNGO": (("DNGOTuner",), "it needs pybnn, which is unmaintained"),
    "PPO": (("PPOTuner",), "it is a NAS tuner, out of trialfleet's HPO scope"),
    "Hyperband": ((), "advisors (tuners that also stop trials) are not supported"),
    "BOHB": ((), "advisors (tuners that also stop trials) are not supported"),
    "Curvefitting": ((), "not implemented; use Medianstop"),
}


def builtins_of(kind: str) -> tuple[BuiltinAlgorithm, ...]:
    if kind == "advisor":
        raise AlgorithmError(
            "advisors (NNI's Hyperband, BOHB and custom MsgDispatcherBase classes) are not supported: "
            "configure a tuner, plus an assessor such as Medianstop for early stopping"
        )
    if kind == "tuner":
        return BUILTIN_TUNERS
    if kind == "assessor":
        return BUILTIN_ASSESSORS
    raise ValueError(f"kind must be 'tuner' or 'assessor', got {kind!r}")


def find_builtin(name: str, kind: str) -> BuiltinAlgorithm | None:
    return next((entry for entry in builtins_of(kind) if entry.matches(name)), None)


def is_builtin_name(name: str) -> bool:
    """Whether ``name`` is a built-in tuner or assessor (a name ``algo register`` must not take)."""
    return any(entry.matches(name) for entry in (*BUILTIN_TUNERS, *BUILTIN_ASSESSORS))


def refuse_not_offered(name: str, kind: str, available: Iterable[str]) -> None:
    """Raise AlgorithmError if ``name`` is an NNI built-in that trialfleet does not offer."""
    for canonical, (aliases, reason) in NOT_OFFERED.items():
        if name.lower() in (n.lower() for n in (canonical, *aliases)):
            raise AlgorithmError(
                f"{kind} '{name}' is an NNI built-in that trialfleet does not offer: {reason}. "
                f"Available {kind}s: {', '.join(available)}"
            )
