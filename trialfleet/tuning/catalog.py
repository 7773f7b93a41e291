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
    install: str = "pip install 'trialfleet[tuners]'"  # how to get ``requires``
    advisor: bool = False  # NNI's advisors: also given as v1 ``advisor:``; an assessor is ignored with them

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
_SKLEARN = ("sklearn",)


def _tuner(name: str, target: str, library: str, *aliases: str, **options: Any) -> BuiltinAlgorithm:
    return BuiltinAlgorithm(name, "tuner", f"{_HERE}.{target}", library, aliases, **options)


BUILTIN_TUNERS: tuple[BuiltinAlgorithm, ...] = (
    _tuner("TPE", "tuners.optuna_samplers:TpeTuner", "optuna TPESampler", requires=_OPTUNA),
    _tuner("Random", "tuners.random_search:RandomTuner", "trialfleet", "RandomTuner"),
    _tuner("Anneal", "tuners.anneal:AnnealTuner", "trialfleet (hyperopt's anneal)"),
    _tuner("Evolution", "tuners.optuna_samplers:EvolutionTuner", "optuna NSGAIISampler", requires=_OPTUNA),
    _tuner("Batch", "tuners.batch:BatchTuner", "trialfleet", "BatchTuner"),
    _tuner("GridSearch", "tuners.gridsearch:GridSearchTuner", "trialfleet", "GridSearchTuner"),
    _tuner("GP", "tuners.gp:GPTuner", "scikit-learn GaussianProcessRegressor", "GPTuner", requires=_SKLEARN),
    _tuner(
        "Metis",
        "tuners.metis:MetisTuner",
        "scikit-learn GaussianProcessRegressor",
        "MetisTuner",
        requires=_SKLEARN,
    ),
    _tuner(
        "SMAC",
        "tuners.smac:SmacTuner",
        "SMAC3 (smac)",
        requires=("smac",),
        install="pip install 'trialfleet[tuners]', or use TPE, GP or Metis",
    ),
    _tuner("PBT", "tuners.pbt:PbtTuner", "trialfleet", "PBTTuner"),
    _tuner(
        "RegularizedEvolutionTuner",
        "tuners.regularized_evolution:RegularizedEvolutionTuner",
        "trialfleet",
        "RegularizedEvolution",
    ),
    _tuner("Hyperband", "tuners.hyperband:HyperbandTuner", "trialfleet", advisor=True),
    _tuner("BOHB", "tuners.bohb:BohbTuner", "trialfleet + optuna TPESampler", requires=_OPTUNA, advisor=True),
)

BUILTIN_ASSESSORS: tuple[BuiltinAlgorithm, ...] = (
    BuiltinAlgorithm("Medianstop", "assessor", f"{_HERE}.medianstop:MedianstopAssessor", "trialfleet"),
    BuiltinAlgorithm(
        "Curvefitting",
        "assessor",
        f"{_HERE}.curvefitting:CurvefittingAssessor",
        "scipy curve_fit",
        requires=("scipy",),
    ),
)

# NNI built-in names that are not offered, with why; a config naming one fails at load (never a substitute).
NOT_OFFERED: dict[str, tuple[tuple[str, ...], str]] = {
    "TPE_legacy": (
        (),
        "it is hyperopt's TPE, and trialfleet's TPE is a different implementation (Optuna's TPESampler with NNI's "
        "TPE settings); name TPE to use that one",
    ),
    "NetworkMorphism": (
        ("NetworkMorphismTuner",),
        "it is a neural-architecture-search tuner (Keras/PyTorch graph morphisms); for hyper-parameters use TPE, "
        "Evolution or RegularizedEvolutionTuner",
    ),
    "DNGO": (
        ("DNGOTuner",),
        "it needs pybnn, which is unmaintained, and PyTorch; use GP, Metis or SMAC (Bayesian optimisation too)",
    ),
    "PPO": (
        ("PPOTuner",),
        "it is a reinforcement-learning tuner for neural-architecture search (PyTorch); use Evolution or "
        "RegularizedEvolutionTuner",
    ),
}


def builtins_of(kind: str) -> tuple[BuiltinAlgorithm, ...]:
    """The built-ins of a kind; ``advisor`` (a v1 section, and NNI's kind) gives the tuners that are advisors."""
    if kind == "tuner":
        return BUILTIN_TUNERS
    if kind == "assessor":
        return BUILTIN_ASSESSORS
    if kind == "advisor":
        return tuple(entry for entry in BUILTIN_TUNERS if entry.advisor)
    raise ValueError(f"kind must be 'tuner', 'assessor' or 'advisor', got {kind!r}")


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


def configured_optimize_mode(config: dict[str, Any]) -> str:
    """Whether a stored experiment config (camelCase JSON) maximizes or minimizes: the tuner's classArgs, else
    the built-in's default (TPE minimizes, as in NNI), else maximize. Decides "best" in the CLI and web UI."""
    tuner = config.get("tuner") or config.get("advisor") or {}
    mode = (tuner.get("classArgs") or {}).get("optimize_mode")
    if mode is None and tuner.get("name"):
        entry = find_builtin(str(tuner["name"]), "tuner")
        mode = entry.default_args.get("optimize_mode") if entry is not None else None
    return "minimize" if mode == "minimize" else "maximize"
