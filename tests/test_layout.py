"""The bundle layout: one BundleId value formats, parses and places every bundle path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.layout import (
    BundleId,
    LayoutError,
    bundle_ids_in,
    id_of_local_archive,
    sidecar_of,
)

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
    assert bundle.repo_paths == (
        "bundles/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.tar.zst",
        "bundles/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.json",
        "rows/gpt-5-2_1054f537/expert-vqa@a1b2c3d4.jsonl",
    )
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
