"""`bundler download`, the repository's row table as the dataset viewer loads it, and
`collect --resolve-rows`, all against the local Hub server."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import yaml
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import one_line_error, read_only_folder, run_cli, run_cli_as_any_user
from hubserver import Fault, HubServer
from test_upload import SECOND_SHA, local_files, make_bundles, publish, upload

from bundler.hub.repo.paths import repo_archive
from bundler.local.layout import id_of_local_archive


@pytest.fixture
def published(hub: HubServer, repo_id: str, tmp_path: Path) -> Path:
    bundles = make_bundles(
        tmp_path / "src",
        [
            RunSpec(task="expert-vqa", model="gpt-5.2", rows=4),
            RunSpec(
                task="maze",
                model="Qwen/Qwen3.5-27B",
                rows=3,
                resolved_revision=SECOND_SHA,
                metrics={"maze_solver": {"solved": 2, "by_size": {"small": 1.0, "big": None}}},
            ),
            RunSpec(task="wires", model="claude", rows=2, metrics={"wires": {"label": "ok"}}),
        ],
    )
    publish(bundles, repo_id)
    return bundles


def download(*args: object) -> tuple[int, dict, str]:
    result = run_cli("download", *args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert "Traceback" not in result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def test_download_round_trip_is_byte_identical_and_verifies(
    repo_id: str, published: Path, tmp_path: Path
) -> None:
    target = tmp_path / "downloaded"
    code, report, stderr = download("--repo", repo_id, "-o", target)
    assert code == 0, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["downloaded"] * 3
    assert local_files(target) == local_files(published)
    verified = run_cli("verify", target)
    assert verified.returncode == 0, verified.stderr


def test_download_one_bundle_and_report_unknown_ids(
    repo_id: str, published: Path, tmp_path: Path
) -> None:
    wanted = next(published.rglob("maze@*.tar.zst"))
    bundle_id = f"{wanted.parent.name}/{wanted.name.removesuffix('.tar.zst')}"
    target = tmp_path / "one"
    code, report, _ = download(
        "--repo",
        repo_id,
        "-o",
        target,
        "--bundle",
        bundle_id,
        "--bundle",
        "nobody_00000000/x@unpinned",
    )
    assert code == 1
    outcomes = {b["bundle_id"]: b["outcome"] for b in report["bundles"]}
    assert outcomes == {bundle_id: "downloaded", "nobody_00000000/x@unpinned": "missing"}
    assert sorted(local_files(target)) == [
        f"{bundle_id}.json",
        f"{bundle_id}.tar.zst",
    ]


def test_download_keeps_a_bad_bundle_apart(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    # Someone commits a corrupted archive behind the bundler's back.
    from huggingface_hub import CommitOperationAdd, HfApi

    victim = next(published.rglob("wires@*.tar.zst"))
    path = repo_archive(id_of_local_archive(victim))
    data = bytearray(victim.read_bytes())
    data[-20] ^= 0x55
    HfApi(token=WRITE_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd(path, bytes(data))],
        commit_message="corrupt",
        repo_type="dataset",
    )
    target = tmp_path / "downloaded"
    code, report, _stderr = download("--repo", repo_id, "-o", target)
    assert code == 1
    rejected = [b for b in report["bundles"] if b["outcome"] == "rejected"]
    assert len(rejected) == 1 and "failed verification" in rejected[0]["detail"]
    assert not (target / victim.relative_to(published)).exists()
    assert (target / ".rejected" / victim.relative_to(published)).exists()
    assert run_cli("verify", target).returncode == 0  # what is in the output can be trusted
    assert not list(target.glob(".bundler-download-*"))


def test_download_failing_on_the_hub_is_one_line_not_an_internal_error(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    hub.inject("GET", rf"{repo_id}/resolve/[0-9a-f]+/bundles/", Fault.status(400))
    result = run_cli("download", "--repo", repo_id, "-o", tmp_path / "d", env={"HF_TOKEN": ""})
    assert result.returncode == 1
    error = one_line_error(result.stderr)
    assert error.startswith("error: downloading bundles/") and "HTTP 400" in error


def test_download_a_pull_request_revision(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    hub.create_repo(repo_id)
    bundles = make_bundles(tmp_path / "src", [RunSpec(rows=2)])
    assert upload(bundles, "--repo", repo_id, "--create-pr")[0] == 0
    code, _report, _ = download("--repo", repo_id, "--revision", "refs/pr/1", "-o", tmp_path / "pr")
    assert code == 0
    assert local_files(tmp_path / "pr") == local_files(bundles)
    code, _, stderr = download("--repo", repo_id, "--revision", "refs/pr/9", "-o", tmp_path / "x")
    assert code == 2 and "revision does not exist" in stderr


def test_rows_load_as_one_table_with_datasets(
    repo_id: str, published: Path, tmp_path: Path
) -> None:
    datasets = pytest.importorskip("datasets")
    from huggingface_hub import snapshot_download

    local = Path(snapshot_download(repo_id, repo_type="dataset", local_dir=tmp_path / "snap"))
    card = (local / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    data_files = header["configs"][0]["data_files"][0]["path"]
    assert data_files == "leaderboard/bundles.parquet"
    table = datasets.load_dataset(str(local), split="train")
    assert table.num_rows == 3
    rows = {row["task_name"]: row for row in table}
    assert set(rows) == {"expert-vqa", "maze", "wires"}
    maze = rows["maze"]
    assert maze["resolved_revision"] == SECOND_SHA and maze["is_pinned"] is True
    assert {m["name"]: m["number"] for m in maze["metrics"]} == {
        "maze_solver.solved": 2.0,
        "maze_solver.by_size.small": 1.0,
        "maze_solver.by_size.big": None,
    }
    assert json.loads(rows["wires"]["metrics_json"]) == {"wires": {"label": "ok"}}
    assert rows["wires"]["metrics"][0]["json_value"] == '"ok"'
    assert rows["expert-vqa"]["coverage"] == "complete"
    assert table.column_names[:3] == ["bundle_id", "task_name", "target"]
    assert table.column_names[-4:] == ["sidecar_blob_id", "ranking_metric", "score", "stale"]
    assert rows["maze"]["ranking_metric"] == "maze_solver.solved" and rows["maze"]["score"] == 2.0
    # each task's own config, from the task tables the upload committed beside them
    maze_table = datasets.load_dataset(str(local), "maze", split="train")
    assert maze_table.num_rows == 1
    assert maze_table.features["maze_solver.solved"].dtype == "float64"
    assert maze_table[0]["maze_solver.solved"] == 2.0
    assert maze_table[0]["maze_solver.by_size.small"] == 1.0
    assert sorted(path.name for path in (local / "leaderboard" / "tasks").iterdir()) == [
        "expert-vqa.parquet",
        "maze.parquet",
        "wires.parquet",
    ]


def test_collect_resolve_rows_reads_the_dataset_card(hub: HubServer, tmp_path: Path) -> None:
    card = (
        "---\ndataset_info:\n  features:\n  - name: q\n    dtype: string\n"
        "  splits:\n  - name: test\n    num_examples: 5\n  - name: train\n    num_examples: 50\n"
        "---\n# expert VQA\n"
    )
    hub.create_repo("GPTNT/expert-VQA-rows", files={"README.md": card.encode()})
    sha = hub.commits("GPTNT/expert-VQA-rows")[0].oid
    output = tmp_path / "output"
    write_tree(
        output,
        [
            RunSpec(
                task="complete", rows=5, resolved_revision=sha, hf_repo_id="GPTNT/expert-VQA-rows"
            ),
            RunSpec(
                task="limited", rows=2, resolved_revision=sha, hf_repo_id="GPTNT/expert-VQA-rows"
            ),
            RunSpec(
                task="unpinned", rows=2, resolved_revision=None, hf_repo_id="GPTNT/expert-VQA-rows"
            ),
            RunSpec(task="gone", rows=2, resolved_revision="0" * 40, hf_repo_id="GPTNT/missing"),
        ],
        how_do_you=False,
    )
    result = run_cli(
        "collect", output, "-o", tmp_path / "bundles", "--resolve-rows", "--allow-partial", "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    by_task = {b["bundle_id"].split("/")[1].split("@")[0]: b for b in report["bundles"]}
    assert by_task["complete"]["coverage"] == "complete"
    assert by_task["limited"]["coverage"] == "partial"  # a limited run never passes as complete
    assert by_task["unpinned"]["coverage"] == "unknown"
    assert any("unpinned" in w for w in by_task["unpinned"]["warnings"])
    assert by_task["gone"]["coverage"] == "unknown"
    assert any("row count not resolved" in w for w in by_task["gone"]["warnings"])
    without = run_cli("collect", output, "-o", tmp_path / "b2", "--resolve-rows", "--json")
    assert without.returncode == 1  # the limited run is refused without --allow-partial
    assert "partial run: 2 of 5 rows" in without.stderr


def test_a_hostile_dataset_card_never_reaches_the_clients_card_model(
    hub: HubServer, tmp_path: Path
) -> None:
    """Anyone can write a dataset's card. A key named like one of huggingface_hub's card-model
    arguments made its parser raise a TypeError (an internal error, exit 2): the card is read
    by the JSON parser alone, and only `dataset_info` is taken from it."""
    card = (
        "---\nignore_metadata_errors: false\ndataset_info:\n  splits:\n"
        "  - name: test\n    num_examples: 2\n---\n"
    )
    hub.create_repo("GPTNT/hostile-card", files={"README.md": card.encode()})
    sha = hub.commits("GPTNT/hostile-card")[0].oid
    output = tmp_path / "output"
    spec = RunSpec(task="hostile", rows=2, resolved_revision=sha, hf_repo_id="GPTNT/hostile-card")
    write_tree(output, [spec], how_do_you=False)
    result = run_cli("collect", output, "-o", tmp_path / "bundles", "--resolve-rows", "--json")
    assert result.returncode == 0, result.stderr
    (bundle,) = json.loads(result.stdout)["bundles"]
    assert bundle["coverage"] == "complete" and "Traceback" not in result.stderr


def test_download_pr_fetches_only_what_the_pull_request_proposes(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    """A maintainer reviewing PR #N wants its bundles, not the branch's every one:
    `--revision refs/pr/N` gives the whole branch as the PR holds it, `--pr N` only what it
    adds or changes."""
    proposed = make_bundles(tmp_path / "pr", [RunSpec(task="maze", model="newcomer", rows=2)])
    code, report, stderr = upload(proposed, "--repo", repo_id, "--create-pr", token=SUBMITTER_TOKEN)
    assert code == 0, stderr
    number = report["pull_request_num"]
    env = {"HF_TOKEN": WRITE_TOKEN}
    only = run_cli(
        "download", "--repo", repo_id, "--pr", number, "-o", tmp_path / "a", "--json", env=env
    )
    assert only.returncode == 0, only.stderr
    fetched = json.loads(only.stdout)["bundles"]
    assert [b["bundle_id"].split("_")[0] for b in fetched] == ["newcomer"]
    assert fetched[0]["outcome"] == "downloaded"
    assert local_files(tmp_path / "a") == local_files(proposed)
    whole = run_cli(
        "download", "--repo", repo_id, "--revision", f"refs/pr/{number}", "-o", tmp_path / "b",
        "--json", env=env,
    )  # fmt: skip
    assert len(json.loads(whole.stdout)["bundles"]) == len(local_files(published)) // 2 + 1
    both = run_cli("download", "--repo", repo_id, "--pr", number, "--revision", "x", env=env)
    assert both.returncode == 2 and "--pr or --revision" in both.stderr


def test_download_into_a_file_is_a_usage_error_before_any_request(
    hub: HubServer, repo_id: str, published: Path, tmp_path: Path
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine")
    requests = len(hub.request_log)
    result = run_cli("download", "--repo", repo_id, "-o", taken, env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode == 2, result.stderr
    assert f"{taken}: exists and is not a directory" in result.stderr
    assert taken.read_text() == "mine"
    assert len(hub.request_log) == requests


@pytest.mark.parametrize("kind", ["below a file", "read-only"])
def test_download_into_an_unusable_folder_is_a_usage_error(
    hub: HubServer, repo_id: str, tmp_path: Path, kind: str
) -> None:
    hub.create_repo(repo_id)  # the folder is made after the Hub is read, whatever it holds
    afile = tmp_path / "afile"
    afile.write_text("mine")
    with contextlib.ExitStack() as stack:
        target, problem = afile / "sub", "Not a directory"
        if kind == "read-only":
            target = stack.enter_context(read_only_folder(tmp_path / "read-only"))
            problem = "Permission denied"
        result = run_cli_as_any_user(
            "download", "--repo", repo_id, "-o", target, env={"HF_TOKEN": WRITE_TOKEN}
        )
    assert result.returncode == 2, result.stderr
    assert one_line_error(result.stderr) == (
        f"error: {target}: cannot be used as the output folder: {problem}"
    )
    assert afile.read_text() == "mine"
    assert not target.is_dir() or list(target.iterdir()) == []


@pytest.mark.parametrize("blocked", ["player folder", "sidecar"])
def test_a_bundle_that_cannot_be_saved_fails_alone(
    repo_id: str, published: Path, tmp_path: Path, blocked: str
) -> None:
    victim = next(published.rglob("maze@*.tar.zst"))
    player_dir = victim.parent.relative_to(published)
    sidecar = player_dir / victim.name.replace(".tar.zst", ".json")
    target = tmp_path / "downloaded"
    in_the_way = target / (player_dir if blocked == "player folder" else sidecar)
    if blocked == "player folder":
        target.mkdir()
        in_the_way.write_text("a file where the player folder goes")
    else:
        in_the_way.mkdir(parents=True)
    code, report, stderr = download("--repo", repo_id, "-o", target)
    assert code == 1, stderr
    outcomes = {b["bundle_id"]: b["outcome"] for b in report["bundles"]}
    failed_id = f"{player_dir}/{victim.name.removesuffix('.tar.zst')}"
    assert outcomes.pop(failed_id) == "failed"
    assert list(outcomes.values()) == ["downloaded", "downloaded"]
    [failure] = [b["detail"] for b in report["bundles"] if b["outcome"] == "failed"]
    assert failure.startswith(f"{target / player_dir}")
    assert f"failed {failed_id}: {target / player_dir}" in " ".join(stderr.split())
    saved = {path for path in local_files(target) if not path.startswith(str(player_dir))}
    assert saved == {
        path for path in local_files(published) if not path.startswith(str(player_dir))
    }
    assert not (target / player_dir / victim.name).exists()  # no archive without its sidecar
    assert not list(target.glob(".bundler-download-*"))
