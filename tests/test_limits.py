"""The format bounds everything a later command builds (issue 18): flattened metric names,
run_meta.json's key paths and the distinct usage keys are limited, checked while streaming by
the code collect and verify share, and refused by both alike. Also: revision labels are
lower-case hex, and collect never writes through a symlinked player folder."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from factory import RunSpec, write_run, write_tree
from helpers import (
    Member,
    build,
    edit_manifest,
    forge_consistently,
    only_bundle,
    run_cli_measured,
    with_data,
)

from bundler.core.limits import (
    MAX_METRIC_NAME_CHARS,
    MAX_METRIC_NAMES_CHARS,
    MAX_METRICS,
    MAX_METRICS_BYTES,
    MAX_PREDICTION_BYTES,
    MAX_USAGE_KEY_CHARS,
    MAX_USAGE_KEYS,
)
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import BundleId, LayoutError
from bundler.local.metrics import KeyPathLimitError, flatten_metrics, metric_leaves
from bundler.local.verify import read_bundle

ROWS = 4
MAX_RSS_MIB = 150
"""What test_verify.py holds verify to; the README promises about 220 MB on any input."""


def long_key_metrics() -> bytes:
    """The forgery of issue 18: within MAX_METRICS_BYTES, one key of 512 KiB above 50,000
    leaves, so every flattened name repeats it (25 GB of names)."""
    leaves = ",".join(f'"{number}":1' for number in range(50_000))
    data = ('{"s":{"' + "k" * (512 << 10) + '":{' + leaves + "}}}").encode()
    assert len(data) <= MAX_METRICS_BYTES
    return data


def many_metrics() -> bytes:
    leaves = ", ".join(f'"m{number}": 1' for number in range(MAX_METRICS + 1))
    return ('{"s": {' + leaves + "}}").encode()


def long_names_in_all() -> bytes:
    """Each name within MAX_METRIC_NAME_CHARS, fewer than MAX_METRICS of them, but more than
    MAX_METRIC_NAMES_CHARS together."""
    count = MAX_METRIC_NAMES_CHARS // 1000 + 10
    leaves = ", ".join(f'"{number}": 1' for number in range(count))
    return ('{"s": {"' + "k" * 990 + '": {' + leaves + "}}}").encode()


METRICS_FORGERIES = {
    "long key": (long_key_metrics, "MAX_METRIC_NAME_CHARS"),
    "many metrics": (many_metrics, "MAX_METRICS)"),
    "long names in all": (long_names_in_all, "MAX_METRIC_NAMES_CHARS"),
}


def refusal(report: Any) -> str:
    """The one refusal of a collect: a single line."""
    assert not report.bundles, report.bundles
    assert len(report.refused) == 1, report.refused
    line: str = report.refused[0].error
    assert "\n" not in line
    return line


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    report, _ = build(
        tmp_path, [RunSpec(rows=ROWS)], CollectOptions(expected_rows={"expert-vqa": ROWS})
    )
    return Path(only_bundle(report).archive)


def contents_failure(archive: Path) -> str:
    checks = read_bundle(archive).checks
    failed = [check for check in checks if check.status == "failed"]
    assert [check.name for check in failed] == ["contents"], checks
    return failed[0].detail


# Metric names -------------------------------------------------------------------------------


@pytest.mark.parametrize("forgery", METRICS_FORGERIES)
def test_collect_refuses_metrics_past_the_name_bounds(tmp_path: Path, forgery: str) -> None:
    make, limit = METRICS_FORGERIES[forgery]
    run_dir = write_run(tmp_path / "out", RunSpec(rows=ROWS))
    (run_dir / "metrics.json").write_bytes(make())
    report = collect(tmp_path / "out", tmp_path / "b")
    line = refusal(report)
    assert line.startswith(f"{run_dir / 'metrics.json'}: ")
    assert limit in line


@pytest.mark.parametrize("forgery", METRICS_FORGERIES)
def test_verify_refuses_a_consistent_bundle_past_the_name_bounds(
    archive: Path, forgery: str
) -> None:
    """The claim says nothing of metrics, so a forger who re-hashes everything makes a bundle
    whose only fault is the limit: verify passed it before, and inspect then flattened it."""
    make, limit = METRICS_FORGERIES[forgery]

    def swap_metrics(members: list[Member]) -> list[Member]:
        members[2] = with_data(members[2], make())
        return members

    forge_consistently(archive, swap_metrics)
    detail = contents_failure(archive)
    assert detail.startswith("metrics.json: ") and limit in detail


def test_flattening_stops_at_the_limit_before_building_the_names() -> None:
    """The walk refuses at the first name past the bound, so the 25 GB of names the forgery
    would flatten to are never built (it returns at once, not after minutes)."""
    metrics = json.loads(long_key_metrics())
    started = time.monotonic()
    with pytest.raises(KeyPathLimitError, match="MAX_METRIC_NAME_CHARS"):
        flatten_metrics(metrics)
    assert time.monotonic() - started < 1


def test_metrics_at_the_bounds_flatten() -> None:
    key = "k" * (MAX_METRIC_NAME_CHARS - 2)
    assert [name for name, _ in metric_leaves({"s": {key: 1}})] == [("s", key)]
    with pytest.raises(KeyPathLimitError):
        metric_leaves({"s": {key + "k": 1}})
    at_limit = {"s": {f"m{number}": number for number in range(MAX_METRICS)}}
    assert len(flatten_metrics(at_limit)) == MAX_METRICS


def test_run_meta_key_paths_have_the_same_bounds(tmp_path: Path) -> None:
    """diff names each differing run_meta.json field by its path: the same forgery in the
    capabilities would flatten into gigabytes there."""
    leaves = {str(number): 1 for number in range(10_000)}
    spec = RunSpec(rows=ROWS, extra_capabilities={"tools": {"k" * (64 << 10): leaves}})
    run_dir = write_run(tmp_path / "out", spec)
    line = refusal(collect(tmp_path / "out", tmp_path / "b"))
    assert line.startswith(f"{run_dir / 'run_meta.json'}: ")
    assert "field name" in line and "MAX_METRIC_NAME_CHARS" in line


# Usage keys ---------------------------------------------------------------------------------


def write_usage(run_dir: Path, index: int, usage: dict[str, int]) -> None:
    path = run_dir / f"prediction_{index}.json"
    record = json.loads(path.read_bytes())
    record["usage"] = usage
    path.write_text(json.dumps(record))


USAGE_FORGERIES = {
    "too many keys": ({f"k{number}": 1 for number in range(MAX_USAGE_KEYS + 1)}, "MAX_USAGE_KEYS"),
    "a long key": ({"t" * (MAX_USAGE_KEY_CHARS + 1): 1}, "MAX_USAGE_KEY_CHARS"),
}


@pytest.mark.parametrize("forgery", USAGE_FORGERIES)
def test_collect_refuses_usage_past_the_key_bounds(tmp_path: Path, forgery: str) -> None:
    usage, limit = USAGE_FORGERIES[forgery]
    run_dir = write_run(tmp_path / "out", RunSpec(rows=ROWS))
    write_usage(run_dir, 2, usage)
    line = refusal(collect(tmp_path / "out", tmp_path / "b"))
    assert line.startswith(f"{run_dir / 'prediction_2.json'}: ") and limit in line


def test_usage_at_the_bounds_is_bundled(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "out", RunSpec(rows=ROWS))
    # with input_tokens, output_tokens, reasoning_tokens and the long key: exactly the limit
    usage = {f"k{number}": 1 for number in range(MAX_USAGE_KEYS - 4)}
    write_usage(run_dir, 0, usage)
    write_usage(run_dir, 1, {"t" * MAX_USAGE_KEY_CHARS: 1})
    assert not collect(tmp_path / "out", tmp_path / "b").refused


@pytest.mark.parametrize("forgery", USAGE_FORGERIES)
def test_verify_refuses_a_consistent_bundle_past_the_key_bounds(
    archive: Path, forgery: str
) -> None:
    """The manifest claims exactly the usage the forged prediction gives (within the claim's
    size limit), every digest re-computed: only the limit is wrong, and verify passed it."""
    usage, limit = USAGE_FORGERIES[forgery]

    def forged(members: list[Member]) -> list[Member]:
        original = json.loads(members[3].data)["usage"]
        record = json.loads(members[3].data)
        record["usage"] = usage
        members[3] = with_data(members[3], json.dumps(record).encode())
        manifest = json.loads(members[0].data)
        totals = manifest["predictions"]["usage"]
        for key, value in original.items():  # the first prediction's counts go
            totals[key] -= value
            if not totals[key]:
                del totals[key]
        for key, value in usage.items():
            totals[key] = totals.get(key, 0) + value
        manifest["predictions"]["usage"] = dict(sorted(totals.items()))
        return edit_manifest(lambda m: m.update(predictions=manifest["predictions"]))(members)

    forge_consistently(archive, forged)
    detail = contents_failure(archive)
    assert detail.startswith("predictions/prediction_0.json: ") and limit in detail


@pytest.mark.slow
def test_verify_refuses_the_usage_key_forgery_at_once_in_bounded_memory(
    archive: Path, tmp_path: Path
) -> None:
    """Issue 18: predictions of 100,000 distinct usage keys each, under a manifest that claims
    no usage. verify kept every key until the end (473 MiB for 20 predictions, 911 MiB for
    40); it must refuse at the first prediction past MAX_USAGE_KEYS, in bounded memory."""
    rows = 24

    def flood(members: list[Member]) -> list[Member]:
        template = members[3]
        for index in range(rows):
            record = json.loads(template.data)
            record["index"] = index
            record["usage"] = {f"u{index}_{number}": 1 for number in range(100_000)}
            data = json.dumps(record, separators=(",", ":")).encode()
            assert len(data) <= MAX_PREDICTION_BYTES
            member = with_data(template, data)
            member.info.name = f"predictions/prediction_{index}.json"
            if index + 3 < len(members):
                members[index + 3] = member
            else:
                members.append(member)
        manifest = json.loads(members[0].data)
        files = manifest["files"]
        files[2:] = [
            {"path": f"predictions/prediction_{index}.json", "size": 0, "sha256": ""}
            for index in range(rows)
        ]
        manifest["predictions"].update(usage={}, count=rows)
        return edit_manifest(lambda m: m.update(files=files, predictions=manifest["predictions"]))(
            members
        )

    forge_consistently(archive, flood)
    started = time.monotonic()
    result = run_cli_measured("verify", archive, workdir=tmp_path)
    elapsed = time.monotonic() - started
    print(f"verify peak RSS {result.max_rss_kib // 1024} MiB in {elapsed:.2f} s")
    assert result.returncode == 1, result.stderr
    assert "MAX_USAGE_KEYS" in result.stdout + result.stderr
    assert "prediction_0.json" in result.stdout + result.stderr
    assert result.max_rss_kib < MAX_RSS_MIB * 1024, result.max_rss_kib


# Revision labels ----------------------------------------------------------------------------


def test_collect_refuses_an_upper_case_resolved_revision(tmp_path: Path) -> None:
    """The label is the first 8 characters of resolved_revision (statics-outputs.md), and a
    bundle id names one pin once: upper case is refused, not lowered."""
    run_dir = write_run(tmp_path / "out", RunSpec(resolved_revision="FA15706D" + "0" * 32))
    line = refusal(collect(tmp_path / "out", tmp_path / "b"))
    assert line.startswith(f"{run_dir / 'run_meta.json'}: ")
    assert "upper-case" in line and "lower-case hex" in line


def test_verify_refuses_an_upper_case_resolved_revision(archive: Path) -> None:
    def upper(members: list[Member]) -> list[Member]:
        meta = json.loads(members[1].data)
        meta["statics"]["resolved_revision"] = meta["statics"]["resolved_revision"].upper()
        members[1] = with_data(members[1], json.dumps(meta, indent=2).encode())
        return members

    forge_consistently(archive, upper)
    assert "upper-case" in contents_failure(archive)


@pytest.mark.parametrize("label", ["FA15706D", "Fa15706d"])
def test_bundle_ids_take_only_lower_case_hex_labels(label: str) -> None:
    with pytest.raises(LayoutError, match="lower-case hex"):
        BundleId.parse(f"gpt-5-2_1054f537/expert-vqa@{label}")
    assert BundleId.parse("gpt-5-2_1054f537/expert-vqa@fa15706d").revision_label == "fa15706d"


# Linked player folders ----------------------------------------------------------------------


def test_collect_refuses_to_write_through_a_linked_player_folder(tmp_path: Path) -> None:
    """verify and upload skip links, so a bundle written through one would never be published
    while sync exited 0: collect refuses that run with one line, and the others go through."""
    root = tmp_path / "out"
    write_tree(root, [RunSpec(model="gpt-5.2"), RunSpec(model="other-model")])
    bundles = tmp_path / "b"
    first = collect(root, bundles)
    assert len(first.bundles) == 2 and not first.refused
    linked = Path(first.bundles[0].archive).parent
    elsewhere = tmp_path / "elsewhere"
    linked.rename(elsewhere)
    linked.symlink_to(elsewhere, target_is_directory=True)
    before = sorted(path.name for path in elsewhere.iterdir())
    report = collect(root, bundles)
    assert [bundle.bundle_id for bundle in report.bundles] == [first.bundles[1].bundle_id]
    assert len(report.refused) == 1
    line = report.refused[0].error
    assert "\n" not in line and line.startswith(f"{linked}: symbolic link")
    assert report.refused[0].path == first.bundles[0].run_directory
    assert sorted(path.name for path in elsewhere.iterdir()) == before
