"""PBT's synchronous steps and checkpoint hand-over, its perturbations, and regularized (ageing) evolution."""

from __future__ import annotations

import math
import os
import random
from types import SimpleNamespace

import pytest

from trialfleet.status import TrialStatus
from trialfleet.tuning import HistoryRecord, NoMoreTrialError, create_tuner
from trialfleet.tuning.search_space import contains
from trialfleet.tuning.search_space.flat import flatten
from trialfleet.tuning.tuners.pbt_perturb import perturb

SPACE = {
    "lr": {"_type": "loguniform", "_value": [1e-4, 1.0]},
    "batch": {"_type": "choice", "_value": [16, 32, 64]},
}
ROOT = "/ckpt"
HYPER = ("lr", "batch")


def algo(name, **class_args):
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args=class_args)


def pbt(**class_args):
    return create_tuner(algo("PBT", all_checkpoint_dir=ROOT, population_size=5, seed=1, **class_args), SPACE)


def step(tuner, start, score):
    proposals = {}
    while True:
        try:
            proposals[start + len(proposals)] = tuner.generate_parameters(start + len(proposals))
        except NoMoreTrialError:
            break
    for parameter_id, params in proposals.items():
        value = score(params)
        if value is None:
            tuner.trial_end(parameter_id, False)
        else:
            tuner.receive_trial_result(parameter_id, params, value)
            tuner.trial_end(parameter_id, True)
    return proposals


def test_pbt_first_step_and_waiting():
    tuner = pbt()
    first = {i: tuner.generate_parameters(i) for i in range(5)}
    for index, params in first.items():
        assert (
            params["load_checkpoint_dir"]
            == params["save_checkpoint_dir"]
            == os.path.join(ROOT, str(index), "0")
        )
        assert contains(SPACE, {k: params[k] for k in HYPER})
    with pytest.raises(NoMoreTrialError, match="PBT waits for step 0"):
        tuner.generate_parameters(5)
    for parameter_id in range(4):
        tuner.receive_trial_result(parameter_id, first[parameter_id], 1.0)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(5)
    tuner.receive_trial_result(4, first[4], 0.5)
    assert tuner.generate_parameters(5)["save_checkpoint_dir"].endswith("1")


def test_pbt_bottom_members_take_over_the_best_checkpoint():
    tuner = pbt(fraction=0.2)  # 1 of 5 is top, 1 is bottom
    first = step(tuner, 0, lambda p: p["lr"])
    best = max(first.values(), key=lambda p: p["lr"])
    worst = min(first.values(), key=lambda p: p["lr"])
    second = step(tuner, 5, lambda p: p["lr"])
    by_member = {os.path.dirname(p["save_checkpoint_dir"]): p for p in second.values()}
    assert sorted(by_member) == [os.path.join(ROOT, str(i)) for i in range(5)]
    taken_over = by_member[os.path.dirname(worst["save_checkpoint_dir"])]
    assert taken_over["load_checkpoint_dir"] == best["save_checkpoint_dir"]
    for directory, params in by_member.items():
        assert params["save_checkpoint_dir"] == os.path.join(directory, "1")
        if params is not taken_over:
            assert params["load_checkpoint_dir"] == os.path.join(directory, "0")
            assert {k: params[k] for k in HYPER} in [{k: p[k] for k in HYPER} for p in first.values()]


def test_pbt_failed_trial_scores_worst():
    tuner = pbt(fraction=0.2)
    first = step(
        tuner, 0, lambda p: None if p["save_checkpoint_dir"].startswith("/ckpt/3") else 1.0 + p["lr"]
    )
    best = max(
        (p for p in first.values() if not p["save_checkpoint_dir"].startswith("/ckpt/3")),
        key=lambda p: p["lr"],
    )
    second = step(tuner, 5, lambda p: 1.0)
    member3 = next(p for p in second.values() if p["save_checkpoint_dir"] == "/ckpt/3/1")
    assert member3["load_checkpoint_dir"] == best["save_checkpoint_dir"]


def test_pbt_restore_mid_step():
    tuner = pbt()
    first = step(tuner, 0, lambda p: p["lr"])
    second = {5 + i: tuner.generate_parameters(5 + i) for i in range(3)}
    records = [HistoryRecord(i, p, p["lr"], TrialStatus.SUCCEEDED.value) for i, p in first.items()]
    records += [HistoryRecord(i, p, None, TrialStatus.RUNNING.value) for i, p in second.items()]
    resumed = pbt()
    resumed.restore(records)
    rest = {8: resumed.generate_parameters(8), 9: resumed.generate_parameters(9)}
    saved = {p["save_checkpoint_dir"] for p in [*second.values(), *rest.values()]}
    assert saved == {os.path.join(ROOT, str(i), "1") for i in range(5)}  # every member once in step 1
    with pytest.raises(NoMoreTrialError):
        resumed.generate_parameters(10)
    for parameter_id, params in {**second, **rest}.items():
        resumed.receive_trial_result(parameter_id, params, 1.0)
    assert resumed.generate_parameters(10)["save_checkpoint_dir"].endswith("2")


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ({"_type": "choice", "_value": ["a", "b", "c"]}, 1, {0, 2}),  # neighbouring options
        ({"_type": "choice", "_value": ["a", "b", "c"]}, 0, {0, 1}),  # clipped at the ends
        ({"_type": "randint", "_value": [0, 10]}, 5, {4, 6}),
        ({"_type": "uniform", "_value": [0, 10]}, 5.0, {3.0, 7.0}),  # factor 0.2 of the width
        ({"_type": "uniform", "_value": [0, 10]}, 9.0, {7.0, 10.0}),
        ({"_type": "quniform", "_value": [0, 10, 2]}, 4.0, {2.0, 6.0}),  # by q
        ({"_type": "normal", "_value": [0, 5]}, 1.0, {0.0, 2.0}),  # factor 0.2 of sigma
    ],
)
def test_pbt_perturbation_moves_one_step(spec, value, expected):
    specs = flatten({"p": spec})
    rng = random.Random(0)
    seen = {perturb({("p",): value}, specs, 0.2, 0.0, rng)[("p",)] for _ in range(50)}
    assert {round(v, 9) for v in seen} == expected


def test_pbt_loguniform_moves_in_log_space():
    specs = flatten({"lr": {"_type": "loguniform", "_value": [1e-4, 1.0]}})
    moved = {
        perturb({("lr",): math.log(1e-2)}, specs, 0.25, 0.0, random.Random(i))[("lr",)] for i in range(30)
    }
    assert {round(math.exp(v), 6) for v in moved} == {0.001, 0.1}  # a quarter of 4 decades either way


def test_regularized_evolution_mutates_one_parameter_of_a_tournament_winner():
    space = {f"p{i}": {"_type": "choice", "_value": list(range(10))} for i in range(4)}
    tuner = create_tuner(algo("RegularizedEvolution", population_size=6, sample_size=6, seed=2), space)
    initial = [tuner.generate_parameters(i) for i in range(6)]
    for parameter_id, params in enumerate(initial):
        tuner.receive_trial_result(parameter_id, params, sum(params.values()))
        tuner.trial_end(parameter_id, True)
    best = max(initial, key=lambda p: sum(p.values()))
    # a tournament over the whole population always picks the best; the child differs in at most one parameter
    child = tuner.generate_parameters(6)
    assert sum(child[k] != best[k] for k in space) <= 1


def test_regularized_evolution_ages_out_the_oldest():
    space = {f"p{i}": {"_type": "choice", "_value": list(range(100))} for i in range(3)}
    tuner = create_tuner(algo("RegularizedEvolutionTuner", population_size=3, sample_size=3, seed=5), space)
    # the best (0.9) is the oldest: it leaves when the fourth result (its own child's) arrives
    scores = [0.9, 0.2, 0.3, 0.1]
    proposals = []
    for parameter_id, score in enumerate(scores):
        proposals.append(tuner.generate_parameters(parameter_id))
        tuner.receive_trial_result(parameter_id, proposals[-1], score)
        tuner.trial_end(parameter_id, True)
    # a tournament over the whole population now picks the 0.3 individual, no longer the aged-out 0.9 one
    child = tuner.generate_parameters(4)
    assert sum(child[k] != proposals[2][k] for k in space) <= 1
    assert sum(child[k] != proposals[0][k] for k in space) >= 2


def test_regularized_evolution_replaces_a_failed_initial_individual():
    space = {"x": {"_type": "uniform", "_value": [0, 1]}}
    tuner = create_tuner(algo("RegularizedEvolutionTuner", population_size=2, sample_size=1, seed=5), space)
    first = tuner.generate_parameters(0)
    tuner.trial_end(0, False)
    second, third = tuner.generate_parameters(1), tuner.generate_parameters(2)
    assert len({first["x"], second["x"], third["x"]}) == 3  # two more random individuals, as in NNI
