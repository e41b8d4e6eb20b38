"""export-gptnt: real bundles into the folders GPTNT's own submission flow expects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from factory import RunSpec, gptnt_capabilities
from helpers import (
    all_files,
    build,
    forge,
    one_line_error,
    only_bundle,
    read_only_folder,
    run_cli,
    run_cli_as_any_user,
)

from bundler.core.errors import UsageError
from bundler.core.naming import capability_fingerprint
from bundler.local.collect import CollectOptions
from bundler.local.export import (
    GPTNT_CAPABILITY_FIELDS,
    ExportReport,
    SubmitterOverrides,
    export_gptnt,
    gptnt_instant,
    load_player_config,
)
from bundler.local.layout import TEMP_PREFIX
from bundler.local.submitter import Submitter

FIXTURES = Path(__file__).parent / "fixtures" / "gptnt"
CONFIG = FIXTURES / "gpt-5-2.yaml"
FOLDER = "20260615_gpt-5-2-high_d34f0ac3_expert-vqa_a1b2c3d4"
"""The folder the fixture describes, named by hand from gptnt-submission.md."""
ADA = Submitter(name="Ada Lovelace", contact="@ada")


def gptnt_spec(**changes: object) -> RunSpec:
    fields: dict[str, object] = {
        "player_name": "gpt-5-2",
        "exact_capabilities": gptnt_capabilities("gpt-5-2"),
        "rows": 4,
    }
    return RunSpec(**(fields | changes))  # type: ignore[arg-type]


def collect_one(
    tmp: Path, spec: RunSpec, submitter: Submitter = ADA, *, rows: int | None = 4
) -> Path:
    options = CollectOptions(
        submitter=submitter, expected_rows={spec.task: rows} if rows is not None else {}
    )
    report, _ = build(tmp, [spec], options)
    return Path(only_bundle(report).archive)


def run_metrics(tmp: Path, spec: RunSpec) -> bytes:
    return (tmp / "out" / f"{spec.task}_predictions" / spec.model / "metrics.json").read_bytes()


def test_the_folder_is_exactly_what_gptnt_writes(tmp_path: Path) -> None:
    spec = gptnt_spec()
    archive = collect_one(tmp_path, spec)
    out = tmp_path / "submissions"
    report = export_gptnt([archive], out, CONFIG)
    assert report.exit_code == 0
    [exported] = report.bundles
    assert exported.outcome == "exported", exported
    assert exported.warnings == []
    assert exported.submission_id == "2026-06-15_gpt-5-2_d34f0ac3_expert-vqa@a1b2c3d4"
    folder = out / FOLDER
    assert exported.folder == str(folder)
    assert all_files(out) == [folder / "metrics.json", folder / "submission.yaml"]
    expected = (FIXTURES / FOLDER / "submission.yaml").read_bytes()
    assert (folder / "submission.yaml").read_bytes() == expected
    assert (folder / "metrics.json").read_bytes() == run_metrics(tmp_path, spec)

    # What GPTNT's validator re-derives holds: the fingerprint matches its capabilities.
    player = yaml.safe_load(expected)["players"][0]
    assert player["fingerprint"] == capability_fingerprint(player["capabilities"])

    again = export_gptnt([archive.parent], out, CONFIG)
    assert [bundle.outcome for bundle in again.bundles] == ["unchanged"]
    assert not [path for path in out.iterdir() if path.name.startswith(TEMP_PREFIX)]


def test_capabilities_are_written_in_gptnt_order_whatever_the_recorded_order(
    tmp_path: Path,
) -> None:
    recorded = gptnt_capabilities("gpt-5-2")
    shuffled = dict(reversed(list(recorded.items())))
    shuffled["usage_limits"] = dict(reversed(list(recorded["usage_limits"].items())))
    archive = collect_one(tmp_path, gptnt_spec(exact_capabilities=shuffled))
    out = tmp_path / "submissions"
    assert export_gptnt([archive], out, CONFIG).exit_code == 0
    written = (out / FOLDER / "submission.yaml").read_bytes()
    assert written == (FIXTURES / FOLDER / "submission.yaml").read_bytes()
    assert list(yaml.safe_load(written)["players"][0]["capabilities"]) == list(
        GPTNT_CAPABILITY_FIELDS
    )


def test_unpinned_runs_and_other_offsets_are_named_as_gptnt_names_them(tmp_path: Path) -> None:
    spec = gptnt_spec(resolved_revision=None, run_date="2026-06-15T01:30:00.250+02:00")
    archive = collect_one(tmp_path, spec, rows=None)
    [exported] = export_gptnt([archive], tmp_path / "o", CONFIG, allow_partial=True).bundles
    assert exported.outcome == "exported", exported
    # 01:30 at +02:00 is the previous day in UTC, and GPTNT dates by UTC
    assert Path(exported.folder or "").name == "20260614_gpt-5-2-high_d34f0ac3_expert-vqa_unpinned"
    assert exported.submission_id == "2026-06-14_gpt-5-2_d34f0ac3_expert-vqa@unpinned"
    submission = yaml.safe_load(Path(exported.folder or "", "submission.yaml").read_text())
    assert submission["run_date"] == "2026-06-14T23:30:00.25Z"
    assert submission["measured"]["resolved_revision"] is None
    warnings = " | ".join(exported.warnings)
    assert "written as 2026-06-14T23:30:00.25Z" in warnings
    assert "coverage is unknown" in warnings


@pytest.mark.parametrize(
    ("recorded", "written"),
    [
        ("2026-06-15T10:42:22.045588909Z", "2026-06-15T10:42:22.045588909Z"),
        ("2026-06-15T10:42:22.100Z", "2026-06-15T10:42:22.1Z"),
        ("2026-06-15T10:42:22.000000Z", "2026-06-15T10:42:22Z"),
        ("2026-06-15T10:42:22+00:00", "2026-06-15T10:42:22Z"),
        ("2026-06-15T01:42:22.5+05:00", "2026-06-14T20:42:22.5Z"),
        ("2026-06-15T10:42Z", "2026-06-15T10:42:00Z"),
    ],
)
def test_run_dates_are_written_as_gptnt_writes_instants(recorded: str, written: str) -> None:
    assert gptnt_instant(recorded) == written


def test_submitter_comes_from_the_bundle_and_the_options_override_it(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec(), Submitter(name="Ada", contact="ada@a.org"))
    overrides = SubmitterOverrides(contact="@lovelace", affiliation="Analytical Engines")
    [exported] = export_gptnt([archive], tmp_path / "o", CONFIG, overrides).bundles
    submission = yaml.safe_load(Path(exported.folder or "", "submission.yaml").read_text())
    assert submission["submitter"] == {
        "name": "Ada",
        "contact": "@lovelace",
        "affiliation": "Analytical Engines",
    }


def test_a_blank_submitter_is_refused(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec(), Submitter())
    out = tmp_path / "o"
    report = export_gptnt([archive], out, CONFIG, SubmitterOverrides(name="Ada"))
    [refused] = report.bundles
    assert (refused.outcome, report.exit_code) == ("refused", 1)
    assert [refusal.kind for refusal in refused.refusals] == ["submitter"]
    assert refused.reason == (
        "submitter contact blank, and GPTNT refuses a submission without them"
    )
    assert all_files(out) == []

    blank = export_gptnt([archive], out, CONFIG, SubmitterOverrides(name=" ", contact=""))
    assert "submitter name and contact blank" in blank.bundles[0].reason


def test_capability_fields_gptnt_would_not_know_are_named(tmp_path: Path) -> None:
    capabilities = gptnt_capabilities("gpt-5-2", vision=True, provider="openrouter")
    capabilities["usage_limits"]["max_cost_usd"] = 25.0
    del capabilities["enable_nobf_generation"]
    archive = collect_one(tmp_path, gptnt_spec(exact_capabilities=capabilities))
    [refused] = export_gptnt([archive], tmp_path / "o", CONFIG).bundles
    assert refused.outcome == "refused"
    assert refused.reason == (
        "capability field(s) GPTNT's schema does not know: vision, provider, "
        "usage_limits.max_cost_usd; capability field(s) GPTNT's schema has and this run "
        "lacks: enable_nobf_generation"
    )


def test_another_players_config_is_refused(tmp_path: Path) -> None:
    qwen = "qwen3-5-27b"
    spec = gptnt_spec(model=qwen, player_name=qwen, exact_capabilities=gptnt_capabilities(qwen))
    archive = collect_one(tmp_path, spec)
    [refused] = export_gptnt([archive], tmp_path / "o", CONFIG).bundles
    assert [refusal.kind for refusal in refused.refusals] == ["player"]
    assert (
        f"{CONFIG} is for player 'gpt-5-2', this bundle's player is 'qwen3-5-27b'" in refused.reason
    )


def test_provenance_gptnt_does_not_keep_is_reported_and_an_unknown_version_refused(
    tmp_path: Path,
) -> None:
    spec = gptnt_spec(extra_provenance={"build": "ci-42"})
    archive = collect_one(tmp_path / "a", spec)
    [exported] = export_gptnt([archive], tmp_path / "o", CONFIG).bundles
    assert exported.outcome == "exported"
    assert exported.warnings == [
        "provenance field(s) build not carried over: GPTNT's submission holds only "
        "gptnt_version and git_sha"
    ]
    submission = yaml.safe_load(Path(exported.folder or "", "submission.yaml").read_text())
    assert list(submission["provenance"]) == ["gptnt_version", "git_sha"]

    unknown = collect_one(tmp_path / "b", gptnt_spec(gptnt_version="0.0.0"))
    [refused] = export_gptnt([unknown], tmp_path / "o2", CONFIG).bundles
    assert [refusal.kind for refusal in refused.refusals] == ["provenance"]


def test_a_bundle_failing_verification_is_refused(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec())

    def drop_last(members: list) -> list:  # type: ignore[type-arg]
        return members[:-1]

    forge(archive, drop_last)
    [refused] = export_gptnt([archive], tmp_path / "o", CONFIG).bundles
    assert [refusal.kind for refusal in refused.refusals] == ["verification"]
    assert "missing" in refused.reason
    assert all_files(tmp_path / "o") == []


def test_a_folder_with_other_content_is_never_replaced(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec())
    folder = tmp_path / "o" / FOLDER
    folder.mkdir(parents=True)
    (folder / "submission.yaml").write_text("hand edited\n")
    [refused] = export_gptnt([archive], tmp_path / "o", CONFIG).bundles
    assert [refusal.kind for refusal in refused.refusals] == ["exists"]
    assert (folder / "submission.yaml").read_text() == "hand edited\n"
    assert not (folder / "metrics.json").exists()


def test_a_folder_with_extra_files_is_refused_not_unchanged(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec())
    out = tmp_path / "o"
    assert export_gptnt([archive], out, CONFIG).exit_code == 0
    folder = out / FOLDER
    (folder / "notes.txt").write_text("mine\n")
    before = {path: path.read_bytes() for path in all_files(out)}
    report = export_gptnt([archive], out, CONFIG)
    [refused] = report.bundles
    assert (refused.outcome, report.exit_code) == ("refused", 1)
    assert [refusal.kind for refusal in refused.refusals] == ["exists"]
    assert {path: path.read_bytes() for path in all_files(out)} == before


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("capabilities:\n  player_name: gpt-5-2\n", "has no identity block"),
        (
            "identity:\n  display_name: X\n  organisation: Y\n  is_os_model: false\n  url: null\n"
            "  rank: 1\ncapabilities:\n  player_name: gpt-5-2\n",
            "identity has key(s) GPTNT does not know: rank",
        ),
        (
            "identity:\n  display_name: X\n  organisation: Y\n  is_os_model: false\n"
            "capabilities:\n  player_name: gpt-5-2\n",
            "identity: missing field 'url'",
        ),
        (
            "identity:\n  display_name: X\n  organisation: Y\n  is_os_model: maybe\n  url: null\n"
            "capabilities:\n  player_name: gpt-5-2\n",
            "identity: is_os_model",
        ),
        ("identity: {display_name: X\n", "not valid YAML"),
        ("- a list\n", "not a player config"),
        ("identity: {}\n", "no capabilities.player_name"),
        # PyYAML's grammar takes these, but building the values fails (not a YAMLError)
        ("capabilities: {player_name: gpt-5-2}\nx: 2026-13-45\n", "month must be in 1..12"),
        ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_unusable_player_configs(tmp_path: Path, content: str, problem: str) -> None:
    config = tmp_path / "player.yaml"
    config.write_text(content)
    with pytest.raises(UsageError, match=r"player\.yaml: ") as raised:
        load_player_config(config)
    assert problem in str(raised.value)


def test_an_oversized_player_config_is_not_loaded(tmp_path: Path) -> None:
    config = tmp_path / "player.yaml"
    config.write_bytes(b"#" * (2 << 20))
    with pytest.raises(UsageError, match="larger than"):
        load_player_config(config)


def test_the_command_exports_some_and_refuses_others(tmp_path: Path) -> None:
    good = gptnt_spec()
    foreign = gptnt_spec(
        task="maze-solve", exact_capabilities=gptnt_capabilities("gpt-5-2", vision=True)
    )
    options = CollectOptions(submitter=ADA, expected_rows={"expert-vqa": 4, "maze-solve": 4})
    _, bundles = build(tmp_path, [good, foreign], options)
    out = tmp_path / "submissions"
    result = run_cli("export-gptnt", bundles, "-o", out, "--player-config", CONFIG, "--json")
    assert result.returncode == 1, result.stderr
    report = ExportReport.model_validate_json(result.stdout)
    assert json.loads(result.stdout)["exit_code"] == 1
    outcomes = {bundle.bundle_id: bundle.outcome for bundle in report.bundles}
    assert sorted(outcomes.values()) == ["exported", "refused"]
    assert (out / FOLDER / "submission.yaml").read_bytes() == (
        FIXTURES / FOLDER / "submission.yaml"
    ).read_bytes()
    assert "refused" in result.stderr and "GPTNT's schema does not know: vision" in result.stderr
    assert "1 exported, 0 unchanged, 1 refused" in result.stderr

    blank = run_cli(
        "export-gptnt", bundles, "-o", out, "--player-config", CONFIG, "--submitter-name", ""
    )
    assert blank.returncode == 1
    assert "submitter name blank" in blank.stderr and "--submitter-name" in blank.stderr


def test_the_command_with_an_unusable_config_exits_2(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec())
    config = tmp_path / "player.yaml"
    config.write_text("capabilities:\n  player_name: gpt-5-2\n")
    result = run_cli("export-gptnt", archive, "-o", tmp_path / "o", "--player-config", config)
    assert result.returncode == 2
    assert "has no identity block" in one_line_error(result.stderr)
    assert not (tmp_path / "o").exists()


def test_an_invalid_date_in_the_config_is_one_line_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "player.yaml"
    config.write_text(CONFIG.read_text() + "released: 2026-13-45\n")
    archive = collect_one(tmp_path, gptnt_spec())
    result = run_cli("export-gptnt", archive, "-o", tmp_path / "o", "--player-config", config)
    assert result.returncode == 2, result.stderr
    error = one_line_error(result.stderr)
    assert f"{config}: not valid YAML" in error and "month must be in 1..12" in error
    assert not (tmp_path / "o").exists()


def test_an_out_dir_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec())
    with read_only_folder(tmp_path / "read-only") as out:
        result = run_cli_as_any_user("export-gptnt", archive, "-o", out, "--player-config", CONFIG)
    assert result.returncode == 2, result.stderr
    assert one_line_error(result.stderr) == (
        f"error: {out}: cannot be used as the output folder: Permission denied"
    )
    assert list(out.iterdir()) == []


def test_identity_values_are_read_as_gptnt_reads_them(tmp_path: Path) -> None:
    config = tmp_path / "player.yaml"
    config.write_text(
        "identity:\n  display_name: Qwen3.5 (27B)\n  organisation: Qwen\n  is_os_model: 'yes'\n"
        "  url: null\ncapabilities:\n  player_name: qwen3-5-27b\n"
    )
    loaded = load_player_config(config)
    assert loaded.player_name == "qwen3-5-27b"
    assert loaded.identity.is_os_model is True and loaded.identity.url is None


def test_a_folder_exports_its_player_and_skips_the_others(tmp_path: Path) -> None:
    qwen = "qwen3-5-27b"
    other = gptnt_spec(model=qwen, player_name=qwen, exact_capabilities=gptnt_capabilities(qwen))
    options = CollectOptions(submitter=ADA, expected_rows={"expert-vqa": 4})
    _, bundles = build(tmp_path, [gptnt_spec(), other], options)
    out = tmp_path / "submissions"
    result = run_cli("export-gptnt", bundles, "-o", out, "--player-config", CONFIG)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "skipped" in line and ":" in line]
    assert "skipped: another player (qwen3-5-27b)" in line
    assert "1 exported, 0 unchanged, 0 refused, 1 skipped" in result.stderr
    assert (out / FOLDER / "submission.yaml").is_file()


def test_partial_or_unknown_coverage_is_refused_unless_allow_partial(tmp_path: Path) -> None:
    archive = collect_one(tmp_path, gptnt_spec(), rows=None)
    out = tmp_path / "submissions"
    refused = run_cli("export-gptnt", archive, "-o", out, "--player-config", CONFIG)
    assert refused.returncode == 1
    assert "coverage is unknown" in refused.stderr and "--allow-partial" in refused.stderr
    allowed = run_cli(
        "export-gptnt", archive, "-o", out, "--player-config", CONFIG, "--allow-partial"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "warning" in allowed.stderr and "coverage is unknown" in allowed.stderr
