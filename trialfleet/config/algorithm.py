"""``tuner`` / ``assessor`` / ``advisor`` blocks (NNI's ``AlgorithmConfig`` and ``CustomAlgorithmConfig``)."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, model_validator

from trialfleet.config.base import (
    ConfigModel,
    ConfigPath,
    JsonMapping,
    path_problem,
    raise_problems,
    resolve_path,
)


class AlgorithmConfig(ConfigModel):
    """A built-in algorithm by ``name``, or a custom one by ``class_name`` imported from ``code_directory``.

    Names are matched against the built-in list by the tuning package, not here.
    """

    name: str | None = None
    """A built-in algorithm, case-insensitive: TPE, Random, GridSearch, Anneal, Evolution, GP, …
    ([tuners](../tuners.md))."""
    class_name: str | None = None  # "module.Class", e.g. "my_tuner.MyTuner"
    """A custom algorithm: `module.Class`, subclassing NNI's `Tuner` or `Assessor`."""
    code_directory: ConfigPath | None = None  # added to sys.path; default: the config's directory
    """Where the custom algorithm's module is (added to `sys.path`); default: the config file's directory."""
    class_args: JsonMapping = Field(default_factory=dict)
    """Keyword arguments of the algorithm (`optimize_mode`, `seed`, …)."""

    @model_validator(mode="after")
    def _check_name_or_class(self, info: ValidationInfo) -> AlgorithmConfig:
        if self.class_name is None:
            if self.name is None:
                raise_problems(
                    [(("name",), "required field is missing (or set className for a custom algorithm)")]
                )
            if self.code_directory is not None:
                raise_problems([(("codeDirectory",), "only allowed together with className")])
            return self
        if self.name is not None:
            raise_problems([(("name",), "set either name (built-in) or className (custom), not both")])
        if self.code_directory is None:
            self.code_directory = resolve_path(".", info)
        problem = path_problem(self.code_directory, "directory", "code directory", info)
        raise_problems([(("codeDirectory",), problem)] if problem else [])
        return self
