"""``GP``: Bayesian optimisation with scikit-learn's GaussianProcessRegressor (NNI's ``gp_tuner``).

As in NNI: a Matern kernel (``nu``), observation noise ``alpha`` and normalised targets; ``cold_start_num``
random proposals first; then the acquisition (``utility`` ``ei``/``ucb``/``poi`` with ``kappa`` and ``xi``) is
maximised over ``selection_num_warm_up`` random points, then by L-BFGS-B from ``selection_num_starting_points``
random starts. Numeric choices are ordered numbers, the nearest option wins.

Differences from NNI: the model works in the unit cube (log scale for the log types, where NNI uses raw values,
so a ``loguniform`` range spanning decades is modelled evenly); the kernel's length scale is bounded and fitted
from 3 starts (NNI: unbounded, 26); the L-BFGS-B starts climb together in one batched run of at most 200 steps
(see :func:`polish`); proposals still running count as the worst result so far (a constant liar, so that
trials run side by side do not all get the same point; NNI's GP ignores them); ``seed`` is accepted. The types are NNI's GP's: no normal types, no nesting, no strings.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.base import BuiltinTuner
from trialfleet.tuning.search_space.flat import flatten, from_parameters, to_parameters
from trialfleet.tuning.search_space.unit_cube import UnitCube
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

NUMERIC_TYPES = frozenset({"choice", "randint", "uniform", "quniform", "loguniform", "qloguniform"})
UTILITIES = ("ei", "ucb", "poi")
# In the unit cube a length scale outside [0.01, 100] is degenerate: the fit otherwise collapses to white noise
# on a few random points, which NNI's 25 restarts of an unbounded fit only sometimes escape.
LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
KERNEL_FIT_RESTARTS = 2
_FD_STEP = 1e-6
_MAX_STEPS = 200  # BoTorch's default for its batched restarts; the rows that matter converge well before


class GPTuner(BuiltinTuner):
    algorithm_name = "GP"
    space_types = NUMERIC_TYPES
    nested_space = False
    numeric_choices = True

    def __init__(
        self,
        optimize_mode: str = "maximize",
        utility: str = "ei",
        kappa: float = 5,
        xi: float = 0,
        nu: float = 2.5,
        alpha: float = 1e-6,
        cold_start_num: int = 10,
        selection_num_warm_up: int = 100000,
        selection_num_starting_points: int = 250,
        seed: int | None = None,
    ) -> None:
        self._maximize = parse_optimize_mode(optimize_mode, "GP") is OptimizeMode.Maximize
        if utility not in UTILITIES:
            raise AlgorithmError(f"GP: classArgs.utility must be one of ei, ucb, poi, got {utility!r}")
        self._utility = utility
        self._kappa = check_number(kappa, "GP", "kappa", minimum=0)
        self._xi = check_number(xi, "GP", "xi", minimum=0)
        self._nu = check_number(nu, "GP", "nu", positive=True)
        self._alpha = check_number(alpha, "GP", "alpha", positive=True)
        self._cold_start = check_count(cold_start_num, "GP", "cold_start_num")
        self._warm_up = check_count(selection_num_warm_up, "GP", "selection_num_warm_up")
        self._starts = check_count(selection_num_starting_points, "GP", "selection_num_starting_points", 0)
        self._seed = check_seed(seed, "GP")
        self._cube = UnitCube([])
        self._rng: np.random.Generator | None = None
        self._xs: list[np.ndarray] = []
        self._ys: list[float] = []  # to maximise
        self._running: dict[int | None, np.ndarray] = {}  # proposals without a result yet

    def update_search_space(self, search_space: Any) -> None:
        import numpy as np

        self.check_search_space(search_space)
        self._cube = UnitCube(flatten(search_space))
        if self._rng is None:
            self._rng = np.random.default_rng(self._seed)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        rng = self._require_rng()
        if len(self._ys) < self._cold_start:
            point = self._cube.sample(rng, 1)[0]
        else:
            with single_threaded():
                point = self._maximize_acquisition(self._fit(), rng)
        self._running[parameter_id] = self._cube.snap(point)
        return to_parameters(self._cube.decode(point), self._cube.specs)

    def reseed(self, restored: int) -> None:
        import numpy as np

        self._rng = np.random.default_rng(derive_seed(self._seed, restored))

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        reward = float(extract_scalar_reward(value))
        self._running.pop(parameter_id, None)
        point = self._point_or_none(parameters)
        if point is not None:
            self._xs.append(point)
            self._ys.append(reward if self._maximize else -reward)

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        self._running.pop(parameter_id, None)

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        point = self._point_or_none(parameters)
        if point is not None:
            self._running[parameter_id] = point

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.receive_trial_result(None, entry["parameter"], entry["value"])

    def _point_or_none(self, parameters: Any) -> np.ndarray | None:
        try:
            return self._cube.encode(from_parameters(parameters, self._cube.specs))
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning("GP: ignoring parameters outside the search space: %r", parameters)
            return None

    def _require_rng(self) -> np.random.Generator:
        if self._rng is None:
            raise RuntimeError("GP: update_search_space must be called first")
        return self._rng

    def _fit(self) -> GaussianProcessRegressor:
        import numpy as np
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import Matern

        gp = GaussianProcessRegressor(
            kernel=Matern(nu=self._nu, length_scale=0.5, length_scale_bounds=LENGTH_SCALE_BOUNDS),
            alpha=self._alpha,
            normalize_y=True,
            n_restarts_optimizer=KERNEL_FIT_RESTARTS,
            random_state=int(self._require_rng().integers(2**31)),
        )
        with warnings.catch_warnings():  # sklearn warns on every badly conditioned fit; NNI silences it too
            warnings.simplefilter("ignore")
            # running proposals count as the worst result so far (a constant liar): without them every
            # proposal made while trials run would be the same acquisition maximum
            lie = [min(self._ys)] * len(self._running)
            gp.fit(np.array(self._xs + list(self._running.values())), np.array(self._ys + lie))
        return gp

    def _maximize_acquisition(self, gp: GaussianProcessRegressor, rng: np.random.Generator) -> np.ndarray:
        best_y = max(self._ys)

        def acquisition(points: np.ndarray) -> np.ndarray:
            return utility(self._utility, gp, points, best_y, self._kappa, self._xi)

        candidates = self._cube.sample(rng, self._warm_up)
        values = acquisition(candidates)
        best_x, best_value = candidates[values.argmax()], float(values.max())
        if self._starts:
            polished = polish(acquisition, self._cube.sample(rng, self._starts))
            values = acquisition(polished)
            if float(values.max()) >= best_value:
                best_x = self._cube.snap(polished[values.argmax()])
        return best_x


def single_threaded() -> Any:
    """OpenBLAS threads make the many small matrix products of a GP twenty times slower on two cores."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def polish(acquisition: Callable[[np.ndarray], np.ndarray], starts: np.ndarray) -> np.ndarray:
    """L-BFGS-B from every start at once, each row climbing the acquisition independently.

    One scipy run on the sum over rows (the rows do not interact, so each converges to its own local maximum)
    costs one batched prediction per step instead of one per start and step: BoTorch optimises its restarts
    the same way. Gradients are forward differences, batched into that same prediction.
    """
    import numpy as np
    from scipy.optimize import minimize

    count, dim = starts.shape
    shifts = np.vstack([np.zeros(dim), np.eye(dim) * _FD_STEP])

    def negative_sum(flat: np.ndarray) -> tuple[float, np.ndarray]:
        points = flat.reshape(count, dim)
        values = acquisition((points[None, :, :] + shifts[:, None, :]).reshape(-1, dim)).reshape(
            dim + 1, count
        )
        gradient = (values[1:] - values[0]) / _FD_STEP
        return -float(values[0].sum()), -gradient.T.ravel()

    result = minimize(
        negative_sum,
        starts.ravel(),
        jac=True,
        bounds=[(0.0, 1.0)] * starts.size,
        method="L-BFGS-B",
        options={"maxiter": _MAX_STEPS},
    )
    return np.asarray(result.x).reshape(count, dim)


def utility(
    kind: str, gp: GaussianProcessRegressor, points: np.ndarray, best_y: float, kappa: float, xi: float
) -> np.ndarray:
    """NNI's acquisition functions (``gp_tuner/util.py``), all to be maximised."""
    import numpy as np
    from scipy.stats import norm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, std = gp.predict(points, return_std=True)
    if kind == "ucb":
        return np.asarray(mean + kappa * std)
    std = np.maximum(std, 1e-12)
    z = (mean - best_y - xi) / std
    if kind == "poi":
        return np.asarray(norm.cdf(z))
    return np.asarray((mean - best_y - xi) * norm.cdf(z) + std * norm.pdf(z))
