"""Every name is welcome: a run whose `player_name` has no ASCII letter or digit (`模型-β`) is
bundled in a folder named by its fingerprint alone (`_<fp8>`, as GPTNT's empty slug leaves it),
and goes through collect, verify, diff, export-gptnt, upload, review, card, download and audit
like any other, the board and the card showing the model's name as recorded; a name that keeps
a few ASCII letters (`Größe-7B-模型`) keeps the folder it always had."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, gptnt_capabilities, write_tree
from helpers import run_cli
from hubserver import HubServer
from huggingface_hub import HfApi

from bundler.core.naming import capability_fingerprint
from bundler.hub.repo.paths import (
    README,
    bundle_of_path,
    repo_archive,
    table_part,
    task_chart,
)
from bundler.local.layout import BundleId

TASK = "expert-vqa"
ROWS = 4
UNICODE = RunSpec(
    model="Zürich-Ünïcode/模型-β",
    player_name="模型-β",
    exact_capabilities=gptnt_capabilities("模型-β"),
    rows=ROWS,
)
MIXED = RunSpec(model="Straße-AI/Größe-7B-模型", player_name="Größe-7B-模型", rows=ROWS, seed=3)
FP8 = capability_fingerprint(gptnt_capabilities("模型-β"))[:8]
UNICODE_ID = f"_{FP8}/{TASK}@a1b2c3d4"


def cli(*args: object, token: str = "") -> tuple[int, dict[str, Any], str]:
    result = run_cli(*args, "--json", env={"HF_TOKEN": token})
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def collected(root: Path, specs: list[RunSpec]) -> Path:
    write_tree(root / "output", specs)
    bundles = root / "bundles"
    code, report, stderr = cli(
        "collect", root / "output", "-o", bundles, "--expect", f"{TASK}={ROWS}",
        "--submitter-name", "Ada", "--submitter-contact", "@ada",
    )  # fmt: skip
    assert code == 0, stderr
    assert not report["refused"], report["refused"]
    return bundles


def board_rows(hub: HubServer, repo_id: str) -> list[dict[str, Any]]:
    data = hub.file_bytes(repo_id, table_part(0)) or b""
    return list(pq.read_table(pa.BufferReader(data)).to_pylist())


def test_a_name_without_ascii_letters_goes_all_the_way(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    bundles = collected(tmp_path, [UNICODE, MIXED])
    archive = BundleId.parse(UNICODE_ID).local_archive(bundles)
    assert archive.is_file()
    mixed_dirs = [p.name for p in bundles.iterdir() if p.name.startswith("gr-e-7b_")]
    assert len(mixed_dirs) == 1  # the folder such a name always had

    code, report, stderr = cli("verify", bundles)
    assert code == 0, stderr
    assert len(report["bundles"]) == 2

    code, report, stderr = cli("diff", archive, archive)
    assert code == 0, stderr

    config = tmp_path / "模型-β.yaml"
    config.write_text(
        "identity:\n  display_name: 模型-β\n  organisation: Zürich\n  is_os_model: true\n"
        "  url: null\ncapabilities:\n  player_name: 模型-β\n",
        encoding="utf-8",
    )
    code, report, stderr = cli(
        "export-gptnt", archive, "-o", tmp_path / "gptnt", "--player-config", config
    )
    assert code == 0, stderr
    (exported,) = report["bundles"]
    # GPTNT's empty slug leaves the underscores around it: its validator derives these again.
    assert exported["submission_id"] == f"2026-06-15__{FP8}_{TASK}@a1b2c3d4"
    assert Path(exported["folder"]).name == f"20260615__{FP8}_{TASK}_a1b2c3d4"

    code, report, stderr = cli("upload", bundles, "--repo", repo_id, token=WRITE_TOKEN)
    assert code == 0, stderr
    files = hub.list_files(repo_id)
    assert repo_archive(BundleId.parse(UNICODE_ID)) in files
    assert UNICODE_ID in {str(bundle_of_path(path)) for path in files}

    rows = {row["bundle_id"]: row for row in board_rows(hub, repo_id)}
    assert rows[UNICODE_ID]["model_name"] == "Zürich-Ünïcode/模型-β"
    assert rows[UNICODE_ID]["player_name"] == "模型-β"
    card = (hub.file_bytes(repo_id, README) or b"").decode()
    assert "Zürich-Ünïcode/模型-β" in card and "Straße-AI/Größe-7B-模型" in card
    assert f"`{FP8}`" in card  # the setup, by its fingerprint

    code, report, stderr = cli("card", "--repo", repo_id, token=WRITE_TOKEN)
    assert code == 0, stderr
    defined = run_cli(
        "tasks", "define", TASK, "--repo", repo_id, "--dataset", "GPTNT/expert-VQA",
        "--split", "test", "--metric", "exact_match.accuracy", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr
    assert hub.file_bytes(repo_id, task_chart(TASK))  # drawn, and audited below

    code, report, stderr = cli(
        "download", "--repo", repo_id, "-o", tmp_path / "down", "--bundle", UNICODE_ID
    )
    assert code == 0, stderr
    downloaded = BundleId.parse(UNICODE_ID).local_archive(tmp_path / "down")
    assert downloaded.read_bytes() == archive.read_bytes()

    code, report, stderr = cli("audit", "--repo", repo_id)
    assert code == 0, stderr
    assert report["findings"] == []


def test_review_takes_a_pull_request_of_such_a_name(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    publish = collected(tmp_path / "main", [MIXED])
    assert cli("upload", publish, "--repo", repo_id, token=WRITE_TOKEN)[0] == 0
    bundles = collected(tmp_path / "pr", [UNICODE])
    code, report, stderr = cli(
        "upload", bundles, "--repo", repo_id, "--create-pr", token=SUBMITTER_TOKEN
    )
    assert code == 0, stderr
    code, report, stderr = cli("download", "--repo", repo_id, "-o", tmp_path / "d", "--pr", "1")
    assert code == 0, stderr
    assert BundleId.parse(UNICODE_ID).local_archive(tmp_path / "d").is_file()

    # No task defined and no dataset on this Hub: warnings only, accepted.
    code, report, stderr = cli(
        "review", "--repo", repo_id, "--comment", "--merge",
        "--accept", "task", "--accept", "dataset-rows", token=WRITE_TOKEN,
    )  # fmt: skip
    assert code == 0, stderr
    (pr,) = report["pull_requests"]
    assert [bundle["bundle_id"] for bundle in pr["bundles"]] == [UNICODE_ID]
    details = HfApi(token=WRITE_TOKEN).get_discussion_details(repo_id, 1, repo_type="dataset")
    said = [event.content for event in details.events if event.type == "comment"]  # type: ignore[attr-defined]
    assert any(f"`{UNICODE_ID}`" in comment for comment in said)  # a code span: no emphasis
    rows = {row["bundle_id"]: row for row in board_rows(hub, repo_id)}
    assert rows[UNICODE_ID]["model_name"] == "Zürich-Ünïcode/模型-β"
    assert "Zürich-Ünïcode/模型-β" in (hub.file_bytes(repo_id, README) or b"").decode()


def test_sync_publishes_such_a_name_chosen_by_its_model_name(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    write_tree(tmp_path / "output", [UNICODE, MIXED])
    code, _, stderr = cli(
        "sync", tmp_path / "output", "-o", tmp_path / "bundles", "--repo", repo_id,
        "--expect", f"{TASK}={ROWS}", "--model", "模型-β", token=WRITE_TOKEN,
    )  # fmt: skip
    assert code == 0, stderr
    published = {str(bundle_of_path(path)) for path in hub.list_files(repo_id)} - {"None"}
    assert published == {UNICODE_ID}


def test_a_named_bundle_moved_to_the_fingerprint_alone_fails_location(tmp_path: Path) -> None:
    bundles = collected(tmp_path, [MIXED])
    (folder,) = [path for path in bundles.iterdir() if not path.name.startswith(".")]
    moved = folder.rename(bundles / ("_" + folder.name.rpartition("_")[2]))
    code, report, stderr = cli("verify", moved)
    assert code == 1, stderr
    (bundle,) = report["bundles"]
    failed = [check["name"] for check in bundle["checks"] if check["status"] == "failed"]
    assert failed == ["location"]
