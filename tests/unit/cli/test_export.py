"""NNI's export formats and the import file's validation."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from trialfleet import export
from trialfleet.errors import ConfigError

RECORDS = [
    {
        "parameter": {"lr": 0.1, "layers": [1, 2]},
        "value": '{"default": 0.9, "loss": 0.1}',
        "trialJobId": "aaaaa",
    },
    {
        "parameter": {"lr": 0.2, "layers": [3]},
        "value": '{"default": 0.8, "loss": 0.2}',
        "trialJobId": "bbbbb",
    },
]
METRICS = [
    {"timestamp": 2, "trialJobId": "aaaaa", "type": "PERIODICAL", "sequence": 1, "data": '"0.5"'},
    {"timestamp": 1, "trialJobId": "aaaaa", "type": "PERIODICAL", "sequence": 0, "data": '"0.4"'},
    {"timestamp": 3, "trialJobId": "aaaaa", "type": "FINAL", "sequence": 0, "data": '"0.9"'},
]


def test_json_export_is_the_export_data_list() -> None:
    assert json.loads(export.render(RECORDS, "json")) == RECORDS


def test_csv_columns_are_parameters_metric_keys_then_trial_id() -> None:
    rows = list(csv.reader(io.StringIO(export.render(RECORDS, "csv"))))
    assert rows[0] == ["lr", "layers", "default", "loss", "trialJobId"]
    assert rows[1] == ["0.1", "[1, 2]", "0.9", "0.1", "aaaaa"]


def test_scalar_metric_is_a_reward_column() -> None:
    records = [{"parameter": {"x": 1}, "value": "0.5", "trialJobId": "ccccc"}]
    rows = list(csv.DictReader(io.StringIO(export.render(records, "csv"))))
    assert rows == [{"x": "1", "reward": "0.5", "trialJobId": "ccccc"}]


def test_intermediate_results_in_report_order() -> None:
    with_intermediate = export.with_intermediate(RECORDS, METRICS)
    assert with_intermediate[0]["intermediate"] == ["0.4", "0.5"]
    assert with_intermediate[1]["intermediate"] == []
    row = next(csv.DictReader(io.StringIO(export.render(with_intermediate, "csv"))))
    assert row["intermediate"] == "[0.4,0.5]"
    assert list(row)[-2:] == ["trialJobId", "intermediate"]


def test_the_platform_of_each_trial_follows_its_id() -> None:
    records = [{**r, "platform": platform} for r, platform in zip(RECORDS, ("local", "slurm"), strict=True)]
    rows = list(csv.reader(io.StringIO(export.render(export.with_intermediate(records, METRICS), "csv"))))
    assert rows[0] == ["lr", "layers", "default", "loss", "trialJobId", "platform", "intermediate"]
    assert [row[4:6] for row in rows[1:]] == [["aaaaa", "local"], ["bbbbb", "slurm"]]
    assert json.loads(export.render(records, "json"))[1]["platform"] == "slurm"
    assert export.parse_import_records(records, source="x")[0] == {  # an export imports as before
        "parameter": {"lr": 0.1, "layers": [1, 2]},
        "value": {"default": 0.9, "loss": 0.1},
    }


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="xml"):
        export.render(RECORDS, "xml")


def test_import_accepts_numbers_dicts_and_exported_strings(tmp_path: Path) -> None:
    file = tmp_path / "data.json"
    file.write_text(
        json.dumps(
            [
                {"parameter": {"x": 1}, "value": 0.5},
                {"parameter": {"x": 2}, "value": {"default": 0.7, "other": 1}},
                {"parameter": {"x": 3}, "value": "0.25", "trialJobId": "ignored"},
            ]
        )
    )
    assert export.load_import_file(file) == [
        {"parameter": {"x": 1}, "value": 0.5},
        {"parameter": {"x": 2}, "value": {"default": 0.7, "other": 1}},
        {"parameter": {"x": 3}, "value": 0.25},
    ]


def test_import_lists_every_bad_record_with_its_index(tmp_path: Path) -> None:
    file = tmp_path / "data.json"
    file.write_text(
        json.dumps(
            [
                {"parameter": {"x": 1}, "value": 0.5},
                {"parameter": [1], "value": 1},
                {"parameter": {"x": 1}},
                {"parameter": {"x": 1}, "value": {"loss": 1}},
                {"parameter": {"x": 1}, "value": True},
                "nonsense",
            ]
        )
    )
    with pytest.raises(ConfigError) as caught:
        export.load_import_file(file)
    message = str(caught.value)
    assert str(file) in message and "5 bad record(s)" in message
    for expected in ("[1].parameter", "[2].value: missing", "[3].value", "[4].value", "[5]:"):
        assert expected in message


@pytest.mark.parametrize(
    ("content", "expected"), [("{", "not valid JSON"), ('{"a": 1}', "expected a JSON list")]
)
def test_import_file_that_is_not_a_list(tmp_path: Path, content: str, expected: str) -> None:
    file = tmp_path / "data.json"
    file.write_text(content)
    with pytest.raises(ConfigError, match=expected):
        export.load_import_file(file)


def test_an_exported_csv_is_refused_with_the_format_expected(tmp_path: Path) -> None:
    file = tmp_path / "trials.csv"
    file.write_text(export.to_csv([{"parameter": {"lr": 0.1}, "value": "0.9", "trialJobId": "t1"}]))
    with pytest.raises(ConfigError) as caught:
        export.load_import_file(file)
    message = str(caught.value)
    assert message.startswith(f"{file}: not valid JSON (")
    assert 'expected a JSON list of {"parameter": {...}, "value": ...} records' in message
    assert "`experiment export --type json`" in message and "a CSV export cannot be imported" in message


def test_import_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        export.load_import_file(tmp_path / "absent.json")


def test_import_of_a_parameter_nested_thousands_deep_is_a_clear_error(tmp_path: Path) -> None:
    file = tmp_path / "deep.json"
    file.write_text('[{"parameter": {"x": ' + "[" * 5000 + "]" * 5000 + '}, "value": 0.5}]')
    with pytest.raises(ConfigError, match="nested too deeply") as caught:
        export.load_import_file(file)
    assert str(file) in str(caught.value)


def test_import_of_a_parameter_nested_past_the_limit_names_the_record_and_the_limit(tmp_path: Path) -> None:
    deep = [{"parameter": {"x": 0.1}, "value": 1}, {"parameter": {"x": json.loads("[" * 900 + "]" * 900)}, "value": 1}]
    file = tmp_path / "deep.json"
    file.write_text(json.dumps(deep))
    with pytest.raises(ConfigError, match=rf"\[1\]\.parameter: nested more than {export.MAX_IMPORT_DEPTH} levels"):
        export.load_import_file(file)
