"""The repository layout (version 3): one BundleId value formats, parses and places every bundle
path, in 256 shards; the tables' paths and the viewer's config names; layout 2's unsharded
paths, read to upgrade."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from bundler.hub.repo.paths import (
    ALL_TABLE,
    ALL_TASKS_CONFIG,
    TASK_TABLES_DIR,
    bundle_ids_in,
    bundle_of_path,
    repo_folder,
    repo_paths,
    task_config_name,
    task_table,
    unsharded_bundle_of,
    unsharded_paths,
)
from bundler.local.layout import BundleId, LayoutError, id_of_local_archive, sidecar_of

ID = "gpt-5-2_1054f537/expert-vqa@a1b2c3d4"


def test_a_bundle_id_round_trips_and_names_every_path() -> None:
    bundle = BundleId.parse(ID)
    assert (bundle.player_dir, bundle.task, bundle.revision_label) == (
        "gpt-5-2_1054f537",
        "expert-vqa",
        "a1b2c3d4",
    )
    assert str(bundle) == ID and bundle.target == "expert-vqa@a1b2c3d4"
    assert bundle.local_archive(Path("b")) == Path("b/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.tar.zst")
    assert bundle.local_sidecar(Path("b")) == Path("b/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.json")
    shard = hashlib.sha256(b"gpt-5-2_1054f537").hexdigest()[:2]  # as the layout documents it
    assert repo_folder(bundle) == f"bundles/{shard}/gpt-5-2_1054f537"
    assert repo_paths(bundle) == (
        f"bundles/{shard}/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.tar.zst",
        f"bundles/{shard}/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.json",
    )  # a bundle owns its archive and sidecar only: the tables are shared
    assert unsharded_paths(bundle) == (
        "bundles/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.tar.zst",
        "bundles/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.json",
    )  # where layout 2 kept them
    for path in repo_paths(bundle):
        assert (bundle_of_path(path), unsharded_bundle_of(path)) == (bundle, None)
    for path in unsharded_paths(bundle):
        assert (bundle_of_path(path), unsharded_bundle_of(path)) == (None, bundle)
    assert bundle.is_pinned and not BundleId.parse("gpt_1054f537/maze@unpinned").is_pinned
    assert id_of_local_archive(bundle.local_archive(Path("x"))) == bundle
    assert sidecar_of(bundle.local_archive(Path("x"))) == bundle.local_sidecar(Path("x"))


@pytest.mark.parametrize(
    "text",
    [
        "expert-vqa@a1b2c3d4",
        "gpt_1054f537/expert-vqa",
        "../x_1054f537/expert-vqa@a1b2c3d4",
        "gpt_1054f537/../expert-vqa@a1b2c3d4",
        "gpt_1054f537/expert-vqa@a1b2c3d4/extra",
        "GPT_1054f537/expert-vqa@a1b2c3d4",
        "gpt_1054f53/expert-vqa@a1b2c3d4",
        "gpt_1054f537/expert-vqa@main",
        "gpt_1054f537/.hidden@a1b2c3d4",
        "gpt_1054f537/expert-vqa@a1b2c3d4\n",
    ],
)
def test_anything_but_a_bundle_id_is_refused(text: str) -> None:
    with pytest.raises(LayoutError):
        BundleId.parse(text)


def test_a_repository_listing_separates_bundles_from_stray_paths() -> None:
    bundle = BundleId.parse(ID)
    elsewhere = BundleId.parse("other_0123abcd/expert-vqa@a1b2c3d4")
    other_shard = repo_folder(elsewhere).split("/")[1]
    assert other_shard != repo_folder(bundle).split("/")[1]
    wrong_shard = f"bundles/{other_shard}/{bundle.player_dir}/{bundle.archive_name}"
    found, invalid = bundle_ids_in(
        [
            *repo_paths(bundle),
            "bundles/stray.tar.zst",
            "bundles/a/b/c@unpinned.tar.zst",
            wrong_shard,
            unsharded_paths(elsewhere)[0],
            "rows/x.jsonl",
            "README.md",
        ]
    )
    assert found == [bundle]
    assert invalid == sorted(
        [
            "bundles/a/b/c@unpinned.tar.zst",
            "bundles/stray.tar.zst",
            wrong_shard,
            unsharded_paths(elsewhere)[0],
        ]
    )


def test_sharding_keeps_every_folder_far_below_the_hubs_10000_entries() -> None:
    """A setup per bundle at 20,000 bundles (the Hub's 100,000 files hold about 50,000): the
    256 shards under `bundles/` hold fewer than 200 player folders each."""
    folders = {
        repo_folder(
            BundleId(f"p{n}_{hashlib.sha256(str(n).encode()).hexdigest()[:8]}", "t", "unpinned")
        )
        for n in range(20_000)
    }
    assert len(folders) == 20_000
    shards = Counter(folder.split("/")[1] for folder in folders)
    assert len(shards) == 256 and all(re.fullmatch("[0-9a-f]{2}", shard) for shard in shards)
    assert max(shards.values()) < 200, shards.most_common(3)


def test_the_tables_are_one_file_for_every_bundle_and_one_per_task() -> None:
    assert ALL_TABLE == "leaderboard/bundles.parquet"
    assert task_table("expert-vqa") == "leaderboard/tasks/expert-vqa.parquet"
    assert task_table("v1.2_maze") == f"{TASK_TABLES_DIR}/v1.2_maze.parquet"
    # `default` keeps its file name; only its config is renamed
    assert task_table("default") == "leaderboard/tasks/default.parquet"
    tables = {task_table(task) for task in ("a", "A", "a.b", "a-b", "a_b")}
    assert len(tables) == 5 and ALL_TABLE not in tables


@pytest.mark.parametrize("task", ["", "../x", "a/b", ".hidden", "_default", "x\n", "a b"])
def test_a_task_name_that_is_no_safe_file_name_has_no_table(task: str) -> None:
    with pytest.raises(LayoutError):
        task_table(task)
    with pytest.raises(LayoutError):
        task_config_name(task)


def test_task_config_names_are_the_task_names_except_the_all_tasks_one() -> None:
    assert task_config_name("expert-vqa") == "expert-vqa"
    assert task_config_name("v1.2_maze") == "v1.2_maze"
    assert {task_config_name("default"), task_config_name("Default")} == {"_default", "_Default"}
    assert ALL_TASKS_CONFIG == "default"  # and no task name can map to it
    with pytest.raises(LayoutError):
        task_config_name("_default")
