"""run_meta.json and prediction records: strict types, kept unknown fields, exact run dates."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from factory import RunSpec
from pydantic import ValidationError

from bundler.core.errors import InputError
from bundler.local.schema import PredictionRecord, StaticsRunMetadata
from bundler.local.validation import parse_prediction, parse_run_meta


def meta(**changes: Any) -> dict[str, Any]:
    raw = RunSpec().run_meta()
    for dotted, value in changes.items():
        target = raw
        *parents, last = dotted.split("__")
        for parent in parents:
            target = target[parent]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return raw


def test_a_real_run_meta_parses_and_keeps_the_nanosecond_date() -> None:
    parsed = StaticsRunMetadata.model_validate(meta())
    assert parsed.run_date == "2026-06-15T10:42:22.045588909Z"
    assert parsed.run_timestamp == int(datetime(2026, 6, 15, 10, 42, 22, tzinfo=UTC).timestamp())
    assert parsed.statics.target == "expert-vqa@a1b2c3d4"
    assert parsed.model_dump(mode="json")["run_date"] == "2026-06-15T10:42:22.045588909Z"


def test_unknown_fields_are_kept_in_capabilities_provenance_and_top_level() -> None:
    raw = meta(
        capabilities__image_dimensions={"width": 448, "height": 448},
        provenance__build="ci-1234",
        harness_notes="resumed once",
    )
    dumped = StaticsRunMetadata.model_validate(raw).model_dump(mode="json")
    assert dumped["capabilities"]["image_dimensions"] == {"width": 448, "height": 448}
    assert dumped["capabilities"]["usage_limits"] == {"max_cost_usd": 25.0}
    assert dumped["provenance"]["build"] == "ci-1234"
    assert dumped["harness_notes"] == "resumed once"


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"model_name": 5}, "model_name"),
        ({"model_name": KeyError}, "missing field 'model_name'"),
        ({"run_date": "2026-06-15T10:42:22"}, "no UTC offset"),
        ({"run_date": "2026-06-15"}, "no UTC offset"),
        ({"run_date": "yesterday"}, "run_date"),
        ({"run_date": 1750000000}, "run_date"),
        ({"statics__task_name": 3}, "statics.task_name"),
        ({"statics__task_name": "../etc"}, "not safe in a path"),
        ({"statics__resolved_revision": "main"}, "not a commit sha"),
        ({"statics__resolved_revision": 12345678}, "statics.resolved_revision"),
        ({"statics__hf_repo_id": KeyError}, "missing field 'statics.hf_repo_id'"),
        ({"capabilities__player_type": "robot"}, "capabilities.player_type"),
        ({"capabilities__player_name": None}, "capabilities.player_name"),
        ({"provenance__gptnt_version": "not a version"}, "PEP 440"),
        ({"provenance__git_sha": 7}, "provenance.git_sha"),
        ({"statics": "expert-vqa"}, "statics"),
    ],
)
def test_run_meta_is_strict(changes: dict[str, Any], problem: str) -> None:
    raw = meta(**changes)
    with pytest.raises(InputError) as caught:
        parse_run_meta(json.dumps(raw).encode(), "out/run_meta.json")
    message = str(caught.value)
    assert message.startswith("out/run_meta.json: ")
    assert problem in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "run_date",
    [
        "2026-06-15X10:42:22Z",
        "2026-06-15\u00e910:42:22Z",
        "2026-06-15T10:42:22+05:30:15.5",
        "2026-06-15 10:42:22Z",
        "2026-06-15t10:42:22z",
        "2026-06-15T10:42:22,5Z",
        "2026-06-15T10:42:22.Z",
        "2026-06-15T10:42Z",
        "20260615T104222Z",
        "2026-06-15T10:42:22+0530",
        "2026-06-15T10:42:22+05",
        "2026-06-15T10:42:22+24:00",
        "2026-06-15T10:42:22.\u0665Z",
    ],
)
def test_run_date_must_be_an_iso_8601_instant(run_date: str) -> None:
    # datetime.fromisoformat takes any separator, basic format, offsets with seconds; the
    # format is YYYY-MM-DDTHH:MM:SS, an optional fraction of any length, then Z or +-HH:MM.
    with pytest.raises(InputError) as caught:
        parse_run_meta(json.dumps(meta(run_date=run_date)).encode(), "out/run_meta.json")
    message = str(caught.value)
    assert message.startswith(f"out/run_meta.json: run_date: run_date {run_date!r} is not ")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("run_date", "timestamp"),
    [
        ("2026-06-15T10:42:22.045588909Z", 1781520142),
        ("2026-06-15T10:42:22Z", 1781520142),
        ("2026-06-15T10:42:22.5Z", 1781520142),
        ("2026-06-15T10:42:22.045588909123Z", 1781520142),
        ("2026-06-15T12:42:22.250+02:00", 1781520142),
        ("2026-06-15T05:12:22-05:30", 1781520142),
        ("2026-06-15T10:42:22-00:00", 1781520142),
    ],
)
def test_run_date_instants_are_accepted_and_kept_as_written(run_date: str, timestamp: int) -> None:
    parsed = StaticsRunMetadata.model_validate(meta(run_date=run_date))
    assert (parsed.run_date, parsed.run_timestamp) == (run_date, timestamp)


@pytest.mark.parametrize(
    ("run_date", "problem"),
    [("2026-13-15T10:42:22Z", "month must be in 1..12"), ("2026-02-30T00:00:00Z", "day is")],
)
def test_run_date_that_is_no_calendar_date_is_refused(run_date: str, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_run_meta(json.dumps(meta(run_date=run_date)).encode(), "out/run_meta.json")
    assert f"run_date {run_date!r}" in str(caught.value) and problem in str(caught.value)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object, found list"),
        (b'{"a": "\xff"}', "not UTF-8"),
    ],
)
def test_run_meta_that_is_not_a_json_object(data: bytes, problem: str) -> None:
    with pytest.raises(InputError, match=problem):
        parse_run_meta(data, "run_meta.json")


def test_parse_run_meta_returns_the_raw_capabilities_for_the_fingerprint() -> None:
    raw = meta(capabilities__ratio=1.0)
    _, kept = parse_run_meta(json.dumps(raw).encode(), "run_meta.json")
    assert kept["capabilities"] == raw["capabilities"]
    assert isinstance(kept["capabilities"]["ratio"], float)


@pytest.mark.parametrize(
    ("git_sha", "dirty"), [("abc123-dirty", True), ("abc123", False), (None, False)]
)
def test_provenance_dirty_tree(git_sha: str | None, dirty: bool) -> None:
    parsed = StaticsRunMetadata.model_validate(meta(provenance__git_sha=git_sha))
    assert parsed.provenance.is_dirty is dirty


def test_unknown_harness_version() -> None:
    parsed = StaticsRunMetadata.model_validate(meta(provenance__gptnt_version="0.0.0"))
    assert not parsed.provenance.is_version_known


def prediction(**changes: Any) -> dict[str, Any]:
    import random

    record = RunSpec().prediction(4, random.Random(1))
    record = copy.deepcopy(record)
    for key, value in changes.items():
        if value is KeyError:
            del record[key]
        else:
            record[key] = value
    return record


def test_a_real_prediction_parses() -> None:
    record = parse_prediction(json.dumps(prediction()).encode(), 4, "p.json")
    assert record.index == 4
    assert record.scored_output == "ANSWER 4"
    assert record.usage == {"input_tokens": 1204, "output_tokens": 304}


def test_scored_output_may_be_missing() -> None:
    record = parse_prediction(json.dumps(prediction(scored_output=KeyError)).encode(), 4, "p")
    assert record.scored_output is None


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"index": "4"}, "index"),
        ({"index": True}, "index"),
        ({"index": -1}, "index"),
        ({"index": KeyError}, "missing field 'index'"),
        ({"usage": {"input_tokens": "12"}}, "usage.input_tokens"),
        ({"usage": {"input_tokens": 1.5}}, "usage.input_tokens"),
        ({"usage": KeyError}, "missing field 'usage'"),
        ({"model": None}, "model"),
        ({"output": KeyError}, "missing field 'output'"),
        ({"thoughts": KeyError}, "missing field 'thoughts'"),
        ({"raw_output": KeyError}, "missing field 'raw_output'"),
        ({"error": KeyError}, "missing field 'error'"),
        ({"exception": KeyError}, "missing field 'exception'"),
        ({"error": 3}, "error"),
        ({"scored_output": 3}, "scored_output"),
    ],
)
def test_predictions_are_strict(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_prediction(json.dumps(prediction(**changes)).encode(), 4, "run/prediction_4.json")
    assert str(caught.value).startswith("run/prediction_4.json: ")
    assert problem in str(caught.value)


def test_prediction_index_must_equal_the_file_name_number() -> None:
    with pytest.raises(InputError, match="index 4 disagrees with the file name's index 5"):
        parse_prediction(json.dumps(prediction()).encode(), 5, "prediction_5.json")


@pytest.mark.parametrize(
    ("data", "problem"),
    [(b"", "not valid JSON"), (b"[]", "found list"), (b'"x"', "found str"), (b"{", "not valid")],
)
def test_prediction_that_is_not_a_json_object(data: bytes, problem: str) -> None:
    with pytest.raises(InputError, match=problem):
        parse_prediction(data, 0, "prediction_0.json")


def test_prediction_exception_may_be_any_json() -> None:
    for value in (None, "boom", {"type": "X", "trace": []}, [1, 2]):
        record = PredictionRecord.model_validate_json(json.dumps(prediction(exception=value)))
        assert record.exception == value


def test_identity_model_refuses_coercion() -> None:
    with pytest.raises(ValidationError):
        StaticsRunMetadata.model_validate(meta(statics__dataset_split=1))
