"""``Metis``: NNI's ``metis_tuner`` (Microsoft Research's Metis) rebuilt on scikit-learn, a faithful subset.

Kept from NNI: random proposals until ``cold_start_num`` distinct points have results; then a Gaussian process on
the median loss of every distinct point gives (1) the current optimum, the point of lowest predicted mean;
(2) unless ``no_candidates``, candidates: the point of lowest confidence bound (mean - 1.96 sd, exploration), the
best likelihood ratio of a Gaussian mixture fitted to the good half over one fitted to the bad half once 12 results
exist (exploitation), and, unless ``no_resampling``, once 50 distinct points exist, the points a leave-one-out GP
calls outliers (|y - mean| > 2.33 sd, at most 3 results each: re-sampling for noisy trials); (3) the candidate
whose imagined result (mean +- 1.96 sd) most lowers the predicted optimum wins. With probability
``exploration_probability``, or when the optimum was already proposed, the winner is proposed, else the optimum.

Differences: the model works in the unit cube (NNI: raw values); the mean, bound and mixture are searched from
``selection_num_starting_points`` random points (the mixture without a local search, the GP ones with one batched
L-BFGS-B run); NNI's summation constraints (never exposed as classArgs) are absent; ``seed`` is accepted.
"""

from __future__ import annotations

import logging
import statistics
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.base import BuiltinTuner
from trialfleet.tuning.search_space.flat import flatten, from_parameters, to_parameters
from trialfleet.tuning.search_space.unit_cube import UnitCube
from trialfleet.tuning.tuners.gp import LENGTH_SCALE_BOUNDS, polish, single_threaded
from trialfleet.tuning.utils import (
    OptimizeMode,
    check_count,
    check_number,
    check_seed,
    derive_seed,
    extract_scalar_reward,
    parse_optimize_mode,
)

if TYPE_CHECKING:
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessRegressor

_logger = logging.getLogger(__name__)

Point = tuple[float, ...]
EXPLOITATION_MIN_RESULTS = 12
RESAMPLING_MIN_POINTS = 50
MAX_RESULTS_PER_POINT = 3
OUTLIER_Z = 2.33
CONFIDENCE_Z = 1.96


class MetisTuner(BuiltinTuner):
    algorithm_name = "Metis"
    space_types = frozenset({"choice", "randint", "uniform", "quniform"})
    nested_space = False
    numeric_choices = True

    def __init__(
        self,
        optimize_mode: str = "maximize",
        no_resampling: bool = True,
        no_candidates: bool = False,
        selection_num_starting_points: int = 600,
        cold_start_num: int = 10,
        exploration_probability: float = 0.9,
        seed: int | None = None,
    ) -> None:
        self._maximize = parse_optimize_mode(optimize_mode, "Metis") is OptimizeMode.Maximize
        for name, flag in (("no_resampling", no_resampling), ("no_candidates", no_candidates)):
            if not isinstance(flag, bool):
                raise AlgorithmError(f"Metis: classArgs.{name} must be true or false, got {flag!r}")
        self._resampling = not no_resampling
        self._candidates = not no_candidates
        self._starts = check_count(selection_num_starting_points, "Metis", "selection_num_starting_points")
        self._cold_start = check_count(cold_start_num, "Metis", "cold_start_num")
        self._explore = check_number(exploration_probability, "Metis", "exploration_probability", minimum=0)
        if self._explore > 1:
            raise AlgorithmError(
                f"Metis: classArgs.exploration_probability must be <= 1, got {exploration_probability!r}"
            )
        self._seed = check_seed(seed, "Metis")
        self._cube = UnitCube([])
        self._rng: np.random.Generator | None = None
        self._losses: dict[
            Point, list[float]
        ] = {}  # distinct point -> every loss seen there (lower is better)
        self._proposed: set[Point] = set()

    def update_search_space(self, search_space: Any) -> None:
        import numpy as np

        self.check_search_space(search_space)
        self._cube = UnitCube(flatten(search_space))
        if self._rng is None:
            self._rng = np.random.default_rng(self._seed)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        rng = self._require_rng()
        if len(self._losses) < self._cold_start:
            point = self._cube.sample(rng, 1)[0]
        else:
            with single_threaded():
                point = self._select(rng)
        self._proposed.add(_key(point))
        return to_parameters(self._cube.decode(point), self._cube.specs)

    def reseed(self, restored: int) -> None:
        import numpy as np

        self._rng = np.random.default_rng(derive_seed(self._seed, restored))

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        reward = float(extract_scalar_reward(value))
        try:
            internal = from_parameters(parameters, self._cube.specs)
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning("Metis: ignoring parameters outside the search space: %r", parameters)
            return
        key = _key(self._cube.encode(internal))
        self._losses.setdefault(key, []).append(-reward if self._maximize else reward)

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        try:
            self._proposed.add(_key(self._cube.encode(from_parameters(parameters, self._cube.specs))))
        except (KeyError, ValueError, TypeError, IndexError):
            return

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.register_proposal(None, entry["parameter"])
            self.receive_trial_result(None, entry["parameter"], entry["value"])

    def _require_rng(self) -> np.random.Generator:
        if self._rng is None:
            raise RuntimeError("Metis: update_search_space must be called first")
        return self._rng

    def _select(self, rng: np.random.Generator) -> np.ndarray:
        points, losses = self._data()
        gp = fit_gp(points, losses, rng)
        starts = self._cube.sample(rng, self._starts)
        optimum, optimum_mean = self._lowest(negated_mean(gp), starts)
        winner = (
            self._best_candidate(gp, points, losses, starts, optimum_mean, rng) if self._candidates else None
        )
        if _key(optimum) in self._proposed or rng.random() <= self._explore:
            return winner if winner is not None else self._cube.sample(rng, 1)[0]
        return optimum

    def _data(self) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        keys = list(self._losses)
        return np.array(keys), np.array([statistics.median(self._losses[k]) for k in keys])

    def _lowest(
        self, score: Callable[[np.ndarray], np.ndarray], starts: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """The point maximising ``score`` (a negated loss), and the loss there."""
        polished = polish(score, starts)
        values = score(polished)
        best = self._cube.snap(polished[values.argmax()])
        return best, -float(score(best[None, :])[0])

    def _best_candidate(
        self,
        gp: GaussianProcessRegressor,
        points: np.ndarray,
        losses: np.ndarray,
        starts: np.ndarray,
        optimum_mean: float,
        rng: np.random.Generator,
    ) -> np.ndarray | None:
        candidates = [self._lowest(lambda p: -lower_bound(gp, p), starts)[0]]
        if sum(len(v) for v in self._losses.values()) >= EXPLOITATION_MIN_RESULTS:
            good = mixture_choice(points, losses, starts)
            if good is not None:
                candidates.append(self._cube.snap(good))
        candidates = [c for c in candidates if _key(c) not in self._losses]
        if self._resampling and len(self._losses) >= RESAMPLING_MIN_POINTS:
            candidates += [
                p for p in outliers(points, losses, rng) if len(self._losses[_key(p)]) < MAX_RESULTS_PER_POINT
            ]
        best, best_gain = None, 0.0
        for candidate in candidates:
            gain = self._expected_optimum(gp, candidate, starts, rng) - optimum_mean
            if gain < best_gain:
                best, best_gain = candidate, gain
        return best

    def _expected_optimum(
        self,
        gp: GaussianProcessRegressor,
        candidate: np.ndarray,
        starts: np.ndarray,
        rng: np.random.Generator,
    ) -> float:
        """The lowest predicted mean after imagining the candidate's result at mean +- 1.96 sd (the better one)."""
        import numpy as np

        mean, sd = predict(gp, candidate[None, :])
        lowest = np.inf
        for imagined in (mean[0] + CONFIDENCE_Z * sd[0], mean[0] - CONFIDENCE_Z * sd[0]):
            losses = {k: list(v) for k, v in self._losses.items()}
            losses.setdefault(_key(candidate), []).append(float(imagined))
            keys = list(losses)
            trial_gp = fit_gp(np.array(keys), np.array([statistics.median(losses[k]) for k in keys]), rng)
            lowest = min(lowest, self._lowest(negated_mean(trial_gp), starts)[1])
        return float(lowest)


def fit_gp(points: np.ndarray, losses: np.ndarray, rng: np.random.Generator) -> GaussianProcessRegressor:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern

    kernel = ConstantKernel(1.0, (1e-12, 1e12)) * Matern(
        nu=1.5, length_scale=0.5, length_scale_bounds=LENGTH_SCALE_BOUNDS
    )
    gp = GaussianProcessRegressor(
        kernel=kernel,
        alpha=1e-10,
        normalize_y=True,
        n_restarts_optimizer=2,
        random_state=int(rng.integers(2**31)),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gp.fit(points, losses)


def predict(gp: GaussianProcessRegressor, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, sd = gp.predict(points, return_std=True)
    return mean, sd


def negated_mean(gp: GaussianProcessRegressor) -> Callable[[np.ndarray], np.ndarray]:
    def score(points: np.ndarray) -> np.ndarray:
        return -predict(gp, points)[0]

    return score


def lower_bound(gp: GaussianProcessRegressor, points: np.ndarray) -> np.ndarray:
    mean, sd = predict(gp, points)
    return mean - CONFIDENCE_Z * sd


def mixture_choice(points: np.ndarray, losses: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
    """The start most likely under a mixture of the better half of the points relative to the worse half."""
    from sklearn.mixture import GaussianMixture

    order = losses.argsort()
    half = len(order) // 2
    groups = [points[order[:half]], points[order[half:]]]
    try:
        good, bad = (
            GaussianMixture(n_components=min(3, len(g)), reg_covar=1e-4, random_state=0).fit(g)
            for g in groups
        )
    except ValueError:  # a collapsed group: no exploitation candidate this time, as in NNI
        return None
    ratio = good.score_samples(starts) - bad.score_samples(starts)
    return starts[ratio.argmax()]


def outliers(points: np.ndarray, losses: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    import numpy as np

    found = []
    for index in range(len(points)):
        keep = np.arange(len(points)) != index
        mean, sd = predict(fit_gp(points[keep], losses[keep], rng), points[index : index + 1])
        if abs(losses[index] - mean[0]) > OUTLIER_Z * sd[0]:
            found.append(points[index])
    return found


def _key(point: np.ndarray) -> Point:
    return tuple(round(float(u), 12) for u in point)
