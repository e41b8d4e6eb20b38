"""The sidecar collect writes is built from the claim without validating it a second time
(bundler.local.claim.sidecar_for): it must serialise exactly as the sidecar validated from the
claim's dump did, for claims of every kind, signed or not."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import RunSpec, write_run, write_tree

from bundler.local.claim import sidecar_bytes, sidecar_for
from bundler.local.collect import CollectOptions, collect
from bundler.local.manifest import ArchiveInfo, BundleClaim, BundleSignature, Sidecar
from bundler.local.schema import StaticsIdentity
from bundler.local.submitter import Submitter


class _NoRowCount:
    """A row count lookup that finds none, so the claims carry a row count note."""

    def rows(self, identity: StaticsIdentity) -> tuple[int | None, str | None]:
        return None, f"no row count for {identity.task_name}: the split is not on the Hub"


def _validated_again(
    claim: BundleClaim, name: str, sha256: str, size: int, signature: BundleSignature | None
) -> Sidecar:
    """The sidecar as it was built before: the claim dumped, then validated with the rest."""
    return Sidecar(
        **claim.model_dump(),
        archive=ArchiveInfo(name=name, size=size, sha256=sha256),
        files_count=claim.predictions.count + 2,
        signature=signature,
    )


def _sidecars(tmp_path: Path, *, note: bool) -> list[Path]:
    out = tmp_path / "out"
    write_tree(
        out,
        [
            RunSpec(model="complete", rows=4),
            RunSpec(model="gapped", rows=5, indices=[0, 2, 4]),
            RunSpec(model="unpinned/dirty", rows=3, resolved_revision=None, git_sha=None),
            RunSpec(model="no-scored", rows=3, scored_output=False, gptnt_version="0.0.0"),
            RunSpec(task="expert-ocr", model="other-task", rows=2),
        ],
    )
    (write_run(out, RunSpec(model="left-out", rows=2)) / "notes.txt").write_text("hello")
    expected = {} if note else {"expert-vqa": 5}
    options = CollectOptions(
        expected_rows=expected,
        allow_partial=True,
        submitter=Submitter(name="Ada", contact="ada@example.org"),
    )
    report = collect(out, tmp_path / "b", options, row_counts=_NoRowCount() if note else None)
    assert report.refused == [] and len(report.bundles) == 6
    return [Path(bundle.sidecar) for bundle in report.bundles]


@pytest.mark.parametrize("note", [False, True])
def test_sidecar_bytes_are_those_of_the_claim_validated_again(tmp_path: Path, note: bool) -> None:
    signature = BundleSignature(sshsig="-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n")
    for path in _sidecars(tmp_path, note=note):
        data = path.read_bytes()
        written = Sidecar.model_validate_json(data)
        claim = BundleClaim.model_validate(
            written.model_dump(include=set(BundleClaim.model_fields))
        )
        archive = written.archive
        built = sidecar_for(claim, archive.name, archive.sha256, archive.size)
        assert sidecar_bytes(built) == data
        for signed in (None, signature):
            again = _validated_again(claim, archive.name, archive.sha256, archive.size, signed)
            built = sidecar_for(claim, archive.name, archive.sha256, archive.size, signed)
            assert sidecar_bytes(built) == sidecar_bytes(again)
            assert built == again
