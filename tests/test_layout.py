"""The bundle layout: one BundleId value formats, parses and places every bundle path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.hub.layout import (
    ALL_TASKS_CONFIG,
    bundle_ids_in,
    repo_paths,
    repo_task_row,
    task_config_name,
    task_rows_glob,
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
    assert repo_paths(bundle) == (
        "bundles/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.tar.zst",
        "bundles/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.json",
        "rows/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.jsonl",
        "tasks/expert-vqa/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.jsonl",
    )
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
    found, invalid = bundle_ids_in(
        [
            f"bundles/{ID}.tar.zst",
            f"bundles/{ID}.json",
            "bundles/stray.tar.zst",
            "bundles/a/b/c@unpinned.tar.zst",
            "rows/x.jsonl",
            "README.md",
        ]
    )
    assert found == [BundleId.parse(ID)]
    assert invalid == ["bundles/a/b/c@unpinned.tar.zst", "bundles/stray.tar.zst"]


def test_a_task_row_is_selected_by_its_own_task_config_only() -> None:
    from fnmatch import fnmatchcase

    rows = [repo_task_row(BundleId.parse(text)) for text in (ID, "x_00000000/expert-vqa2@unpinned")]
    assert [fnmatchcase(row, task_rows_glob("expert-vqa")) for row in rows] == [True, False]
    assert fnmatchcase(rows[1], task_rows_glob("expert-vqa2"))


def test_task_config_names_are_the_task_names_except_the_all_tasks_one() -> None:
    assert task_config_name("expert-vqa") == "expert-vqa"
    assert task_config_name("v1.2_maze") == "v1.2_maze"
    assert {task_config_name("default"), task_config_name("Default")} == {"_default", "_Default"}
    assert ALL_TASKS_CONFIG == "default"  # and no task name can map to it
    with pytest.raises(LayoutError):
        task_config_name("_default")
