"""Building algorithms from config: built-in names, classArgs checks, custom classes and refusals."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import uuid
from types import SimpleNamespace

import pytest

from trialfleet.errors import AlgorithmError, SearchSpaceError
from trialfleet.tuning import (
    NoMoreTrialError,
    Tuner,
    check_algorithm,
    create_assessor,
    create_tuner,
    ignored_assessor_warning,
)
from trialfleet.tuning.base import HistoryRecord
from trialfleet.tuning.tuners.bohb import BohbTuner
from trialfleet.tuning.tuners.gp import GPTuner
from trialfleet.tuning.tuners.hyperband import HyperbandTuner
from trialfleet.tuning.tuners.metis import MetisTuner
from trialfleet.tuning.tuners.optuna_samplers import EvolutionTuner, TpeTuner
from trialfleet.tuning.tuners.pbt import PbtTuner
from trialfleet.tuning.tuners.random_search import RandomTuner
from trialfleet.tuning.tuners.regularized_evolution import RegularizedEvolutionTuner

SPACE = {"x": {"_type": "uniform", "_value": [0, 1]}}


def algo(name=None, class_name=None, code_directory=None, **class_args):
    return SimpleNamespace(
        name=name, class_name=class_name, code_directory=code_directory, class_args=class_args
    )


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("tpe", TpeTuner),
        ("RANDOMTUNER", RandomTuner),
        ("evolution", EvolutionTuner),
        ("gptuner", GPTuner),
        ("MetisTuner", MetisTuner),
        ("pbttuner", PbtTuner),
        ("RegularizedEvolution", RegularizedEvolutionTuner),
        ("HYPERBAND", HyperbandTuner),
        ("bohb", BohbTuner),
    ],
)
def test_names_and_aliases_are_case_insensitive(name, cls):
    check_algorithm(algo(name), "tuner", SPACE)
    assert type(create_tuner(algo(name), SPACE)) is cls


def test_unknown_name_lists_available():
    with pytest.raises(AlgorithmError) as caught:
        check_algorithm(algo("Bayes"), "tuner", SPACE)
    message = str(caught.value)
    assert "unknown tuner 'Bayes'" in message
    for name in (
        "TPE",
        "Random",
        "Anneal",
        "Evolution",
        "Batch",
        "GridSearch",
        "GP",
        "Metis",
        "SMAC",
        "PBT",
        "RegularizedEvolutionTuner",
        "Hyperband",
        "BOHB",
    ):
        assert name in message


@pytest.mark.parametrize(
    ("name", "alternatives"),
    [
        ("TPE_legacy", "name TPE to use that one"),
        ("tpe_legacy", "trialfleet's TPE is a different implementation"),
        ("NetworkMorphism", "use TPE, Evolution or RegularizedEvolutionTuner"),
        ("DNGO", "use GP, Metis or SMAC"),
        ("DNGOTuner", "pybnn, which is unmaintained"),
        ("PPOTuner", "use Evolution or RegularizedEvolutionTuner"),
    ],
)
def test_nni_names_not_offered_are_refused_with_alternatives(name, alternatives):
    with pytest.raises(
        AlgorithmError, match=rf"tuner '{name}' is an NNI built-in that trialfleet does not offer"
    ):
        check_algorithm(algo(name), "tuner", SPACE)
    with pytest.raises(AlgorithmError, match=alternatives) as caught:
        create_tuner(algo(name), SPACE)
    assert "Available tuners: TPE, Random" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "class_args", "expected"),
    [
        (
            "TPE",
            {"optimise_mode": "max"},
            r"unknown classArgs optimise_mode \(accepted: optimize_mode, seed, tpe_args\)",
        ),
        ("TPE", {"optimize_mode": "max"}, "optimize_mode must be 'maximize' or 'minimize', got 'max'"),
        ("TPE", {"tpe_args": {"gama": 0.3}}, r"unknown classArgs.tpe_args key\(s\) gama"),
        ("TPE", {"tpe_args": {"n_startup_jobs": 0}}, "n_startup_jobs must be a positive integer"),
        ("Random", {"seed": "abc"}, "seed must be an integer, got 'abc'"),
        ("Evolution", {"population_size": 1}, "population_size must be an integer >= 2"),
        ("Anneal", {"constant_liar_type": "best"}, "constant_liar_type must be one of min, max, mean"),
        ("Batch", {"seed": 1}, r"unknown classArgs seed \(accepted: none\)"),
        ("GP", {"utility": "pi"}, "utility must be one of ei, ucb, poi, got 'pi'"),
        ("GP", {"nu": 0}, "nu must be a positive number"),
        ("GP", {"cold_start_num": 0}, "cold_start_num must be a positive integer"),
        ("Metis", {"no_resampling": "yes"}, "no_resampling must be true or false"),
        ("Metis", {"exploration_probability": 1.5}, "exploration_probability must be <= 1"),
        ("Hyperband", {"eta": 1}, "eta must be an integer >= 2"),
        ("Hyperband", {"exec_mode": "parallel"}, "exec_mode must be parallelism or serial"),
        ("Hyperband", {"R": 0}, "R must be a positive integer"),
        ("BOHB", {"max_budget": 1, "min_budget": 3}, r"max_budget \(1\) must be >= min_budget \(3\)"),
        ("BOHB", {"top_n_percent": 100}, r"top_n_percent must be an integer in \[1, 99\]"),
        ("PBT", {"fraction": 2}, r"fraction must be in \[0, 1\]"),
        ("PBT", {"population_size": 0}, "population_size must be a positive integer"),
        ("RegularizedEvolution", {"sample_size": 10, "population_size": 5}, "sample_size .* must not exceed"),
        ("SMAC", {"config_dedup": 1}, "config_dedup must be true or false"),
    ],
)
def test_bad_class_args(name, class_args, expected):
    with pytest.raises(AlgorithmError, match=expected):
        check_algorithm(algo(name, **class_args), "tuner", SPACE)


def test_check_validates_the_space_for_the_tuner():
    with pytest.raises(SearchSpaceError, match="search space parameter 'x': uniform needs high > low"):
        check_algorithm(algo("TPE"), "tuner", {"x": {"_type": "uniform", "_value": [1, 0]}})
    with pytest.raises(SearchSpaceError, match="tuner Batch needs a choice"):
        check_algorithm(algo("Batch"), "tuner", {"x": {"_type": "uniform", "_value": [0, 1]}})


@pytest.mark.slow
def test_gp_runs_on_scikit_learn_without_pytorch():
    check_algorithm(algo("GPTuner"), "tuner", SPACE)
    tuner = create_tuner(
        algo("GP", cold_start_num=1, selection_num_warm_up=50, selection_num_starting_points=2), SPACE
    )
    for parameter_id in range(3):
        params = tuner.generate_parameters(parameter_id)
        tuner.receive_trial_result(parameter_id, params, params["x"])
    assert 0 <= params["x"] <= 1
    assert "torch" not in sys.modules


def test_missing_library_is_refused_with_how_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "smac" else real_find_spec(name, *a)
    )
    with pytest.raises(
        AlgorithmError,
        match=r"tuner SMAC is built on SMAC3 \(smac\) and needs the Python package\(s\) smac, which are not "
        r"installed \(pip install 'trialfleet\[tuners\]', or use TPE, GP or Metis\)",
    ):
        check_algorithm(algo("SMAC"), "tuner", SPACE)


def test_optimize_mode_defaults_follow_nni():
    assert create_tuner(algo("TPE"), SPACE)._direction == "minimize"
    assert create_tuner(algo("Evolution"), SPACE)._direction == "maximize"


def test_importing_the_package_loads_no_algorithm_library():
    code = (
        "import sys, trialfleet.tuning; "
        "print(sorted(m for m in ('optuna', 'numpy', 'scipy', 'sklearn', 'smac', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def write_module(directory, source):
    name = f"custom_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(source))
    return name


CUSTOM = """
    from trialfleet.tuning.base import Tuner, NoMoreTrialError

    class Counter(Tuner):
        def __init__(self, start=0, stop=3):
            self.next, self.stop, self.seen = start, stop, []

        def update_search_space(self, search_space):
            self.space = search_space

        def generate_parameters(self, parameter_id, **kwargs):
            if self.next >= self.stop:
                raise NoMoreTrialError()
            self.next += 1
            return {"x": self.next, "space": self.space}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            self.seen.append(value)

    class Broken(Counter):
        def generate_parameters(self, parameter_id, **kwargs):
            raise KeyError("tuner bug")
"""


def test_custom_tuner_from_code_directory(tmp_path):
    module = write_module(tmp_path, CUSTOM)
    config = algo(class_name=f"{module}.Counter", code_directory=tmp_path, start=1, stop=3)
    check_algorithm(config, "tuner", {"anything": [1, 100]})
    tuner = create_tuner(config, {"anything": [1, 100]})
    assert [tuner.generate_parameters(i) for i in range(2)] == [
        {"x": 2, "space": {"anything": [1, 100]}},
        {"x": 3, "space": {"anything": [1, 100]}},
    ]
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(2)


def test_custom_tuner_exception_propagates_unchanged(tmp_path):
    module = write_module(tmp_path, CUSTOM)
    tuner = create_tuner(algo(class_name=f"{module}.Broken", code_directory=tmp_path), {})
    with pytest.raises(KeyError, match="tuner bug"):
        tuner.generate_parameters(0)


def test_custom_import_error_gives_last_traceback_line(tmp_path):
    module = write_module(tmp_path, "raise ValueError('needs a GPU library')\n")
    with pytest.raises(
        AlgorithmError, match=rf"cannot import tuner class '{module}.T'.*ValueError: needs a GPU library"
    ):
        create_tuner(algo(class_name=f"{module}.T", code_directory=tmp_path), {})
    with pytest.raises(AlgorithmError, match="has no attribute 'Missing'"):
        create_tuner(
            algo(class_name=f"{write_module(tmp_path, CUSTOM)}.Missing", code_directory=tmp_path), {}
        )


def test_custom_constructor_error(tmp_path):
    module = write_module(tmp_path, CUSTOM)
    with pytest.raises(AlgorithmError, match=r"cannot create tuner .*Counter with classArgs .*TypeError"):
        create_tuner(algo(class_name=f"{module}.Counter", code_directory=tmp_path, step=2), {})


def test_missing_code_directory(tmp_path):
    with pytest.raises(AlgorithmError, match=r"codeDirectory .* is not a directory"):
        check_algorithm(algo(class_name="m.T", code_directory=tmp_path / "nope"), "tuner", {})


FOREIGN = """
    class NoMoreTrialError(Exception):
        pass

    class Plain:  # written against another Tuner base: not trialfleet's
        def __init__(self):
            self.imported = []
        def update_search_space(self, search_space):
            pass
        def generate_parameters(self, parameter_id, **kwargs):
            raise NoMoreTrialError("done")
        def import_data(self, data):
            self.imported.extend(data)
"""


def test_foreign_tuner_is_adapted(tmp_path):
    module = write_module(tmp_path, FOREIGN)
    tuner = create_tuner(algo(class_name=f"{module}.Plain", code_directory=tmp_path), {})
    assert isinstance(tuner, Tuner)
    with pytest.raises(NoMoreTrialError, match="done"):
        tuner.generate_parameters(0)
    tuner.restore([HistoryRecord(0, {"x": 1}, 0.5, "SUCCEEDED"), HistoryRecord(1, {"x": 2}, None, "FAILED")])
    assert tuner.inner.imported == [{"parameter": {"x": 1}, "value": 0.5}]


NNI_STYLE = """
    import nni
    from nni.tuner import Tuner

    class Once(Tuner):
        def update_search_space(self, search_space):
            self.done = False
        def generate_parameters(self, parameter_id, **kwargs):
            if self.done:
                raise nni.NoMoreTrialError("no more")
            self.done = True
            return {"lr": 0.1}
        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            pass
"""


def test_custom_tuner_written_for_nni(tmp_path):
    # a fresh interpreter, so that `import nni` resolves as in the manager process (no real NNI installed here)
    module = write_module(tmp_path, NNI_STYLE)
    script = f"""
        import sys
        from types import SimpleNamespace
        from trialfleet.tuning import NoMoreTrialError, create_tuner
        algo = SimpleNamespace(name=None, class_name="{module}.Once", code_directory=sys.argv[1], class_args={{}})
        tuner = create_tuner(algo, {{}})
        print(tuner.generate_parameters(0))
        try:
            tuner.generate_parameters(1)
        except NoMoreTrialError as exc:
            print("no more:", exc)
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["{'lr': 0.1}", "no more: no more"]


def test_advisors_by_name_are_the_multi_fidelity_tuners():
    check_algorithm(algo("hyperband"), "advisor", SPACE)
    check_algorithm(algo("BOHB"), "advisor", SPACE)
    with pytest.raises(AlgorithmError, match=r"unknown advisor 'TPE'. Available advisors: Hyperband, BOHB"):
        check_algorithm(algo("TPE"), "advisor", SPACE)
    with pytest.raises(AlgorithmError, match=r"custom advisors .* are not supported"):
        check_algorithm(algo(class_name="my.Advisor"), "advisor", SPACE)


def test_an_assessor_given_with_an_advisor_is_ignored_with_a_warning():
    medianstop = algo("Medianstop")
    warning = ignored_assessor_warning(algo("Hyperband"), medianstop)
    assert warning is not None and "the assessor is ignored: tuner Hyperband is an advisor" in warning
    assert ignored_assessor_warning(algo("bohb"), medianstop) is not None
    assert ignored_assessor_warning(algo("TPE"), medianstop) is None
    assert ignored_assessor_warning(algo("Hyperband"), None) is None


def test_curvefitting_is_a_builtin_assessor():
    check_algorithm(algo("curvefitting", epoch_num=10, start_step=3), "assessor")
    assert type(create_assessor(algo("Curvefitting"))).__name__ == "CurvefittingAssessor"
    with pytest.raises(AlgorithmError, match=r"start_step \(30\) must not exceed epoch_num \(20\)"):
        create_assessor(algo("Curvefitting", start_step=30))
    with pytest.raises(AlgorithmError, match="gap must be a positive integer"):
        check_algorithm(algo("Curvefitting", gap=0), "assessor")
