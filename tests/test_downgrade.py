"""Never a silent downgrade: collect keeps a bundle rather than replace it by one that claims
less, unless --replace (the real CLI on real files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factory import RunSpec, write_tree
from helpers import run_cli

RUN = RunSpec(model="gpt-5.2", rows=4)
SUBMITTER = ("--submitter-name", "Ada", "--submitter-contact", "@ada")


def sidecar_of(bundles: Path) -> dict[str, object]:
    (path,) = [p for p in bundles.rglob("*.json") if p.name != "manifest.json"]
    data: dict[str, object] = json.loads(path.read_text())
    return data


def first_collect(tmp_path: Path, *flags: str) -> tuple[Path, Path, bytes]:
    root, bundles = tmp_path / "out", tmp_path / "bundles"
    write_tree(root, [RUN])
    first = run_cli("collect", root, "-o", bundles, *flags)
    assert first.returncode == 0, first.stderr
    (archive,) = bundles.rglob("*.tar.zst")
    return root, bundles, archive.read_bytes()


@pytest.mark.parametrize(
    ("first", "second", "lost"),
    [
        (["--expect", "expert-vqa=4"], ["--allow-partial"], "coverage complete -> unknown"),
        (["--expect", "expert-vqa=4"], ["--allow-partial"], "expected row count 4"),
        (["--expect", "expert-vqa=4", *SUBMITTER], ["--expect", "expert-vqa=4"], "contact"),
        (["--expect", "expert-vqa=4"], ["--expect", "expert-vqa=5", "--allow-partial"], "partial"),
    ],
)
def test_a_bundle_claiming_less_is_kept_without_replace(
    tmp_path: Path, first: list[str], second: list[str], lost: str
) -> None:
    root, bundles, before = first_collect(tmp_path, *first)
    again = run_cli("collect", root, "-o", bundles, *second, "--json")
    assert again.returncode == 1, again.stderr
    (bundle,) = json.loads(again.stdout)["bundles"]
    assert bundle["outcome"] == "kept" and lost in bundle["kept"]
    assert "--replace" in bundle["kept"] and "bundler.toml" in bundle["kept"]
    if lost == "expected row count 4":
        assert "give the first run's flags (--expect expert-vqa=4)" in bundle["kept"]
    (archive,) = bundles.rglob("*.tar.zst")
    assert archive.read_bytes() == before  # the existing bundle is untouched
    human = run_cli("collect", root, "-o", bundles, *second)
    (line,) = [line for line in human.stderr.splitlines() if line.startswith("kept ")]
    assert lost in line


def test_fewer_rows_present_is_kept(tmp_path: Path) -> None:
    root, bundles, _before = first_collect(tmp_path, "--allow-partial")
    (run_dir,) = (root / "expert-vqa_predictions").iterdir()
    (run_dir / "prediction_3.json").unlink()
    again = run_cli("collect", root, "-o", bundles, "--allow-partial", "--json")
    assert again.returncode == 1
    (bundle,) = json.loads(again.stdout)["bundles"]
    assert bundle["outcome"] == "kept" and "rows present 4 -> 3" in bundle["kept"]
    # every claim that differs, old -> new, not only what would be lost
    assert "it differs in predictions.count 4 -> 3" in bundle["kept"], bundle["kept"]
    assert "coverage.rows_present 4 -> 3" in bundle["kept"]


def test_replace_replaces_and_more_is_never_a_downgrade(tmp_path: Path) -> None:
    root, bundles, _before = first_collect(tmp_path, "--allow-partial")
    more = run_cli("collect", root, "-o", bundles, "--expect", "expert-vqa=4", *SUBMITTER)
    assert more.returncode == 0, more.stderr  # unknown -> complete, a submitter added
    less = run_cli("collect", root, "-o", bundles, "--allow-partial", "--replace", "--json")
    assert less.returncode == 0, less.stderr
    (bundle,) = json.loads(less.stdout)["bundles"]
    assert bundle["outcome"] == "replaced"
    assert sidecar_of(bundles)["coverage"]["status"] == "unknown"  # type: ignore[index]


def test_a_lost_resolve_rows_note_is_a_downgrade(tmp_path: Path) -> None:
    from bundler.local.downgrade import existing_claim, losses

    _root, bundles, _ = first_collect(tmp_path, "--allow-partial")
    (path,) = [p for p in bundles.rglob("*.json")]
    old = existing_claim(path)
    assert old is not None and losses(old, old) == []
    noted = old.model_copy(
        update={"inputs": old.inputs.model_copy(update={"row_count_note": "Hub unreachable"})}
    )
    assert losses(noted, old) == ["the row count lookup's note"]
