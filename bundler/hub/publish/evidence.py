"""What an upload reads from the Hub beyond the listing, for the plan to decide on.

`bundler.hub.publish.plan.triage` says what the listing alone cannot settle: for a bundle the
Hub holds other content under, the Hub's sidecar and its copy, downloaded and verified: when
the claims allow an extension, which of the Hub's predictions the local bundle holds; when they
do not, which metrics it changes, so that a conflict names every value that differs, old and
new. Nothing else is read.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bundler.core.errors import HubAccessError, HubError, TemporaryError
from bundler.core.progress import ProgressSink
from bundler.hub.client.session import HubSession
from bundler.hub.publish.plan import (
    HubEvidence,
    LocalBundle,
    RepositoryView,
    extension_predictions_problem,
    triage,
)
from bundler.hub.repo.download import fetch_bundle
from bundler.local.layout import TEMP_PREFIX, BundleId
from bundler.local.manifest import Sidecar


class EvidenceReader:
    """Reads the evidence the plan needs about each bundle, from one repository."""

    def __init__(self, session: HubSession, progress: ProgressSink, *, create_pr: bool) -> None:
        self.session = session
        self.progress = progress
        self.create_pr = create_pr

    def about(self, bundle: LocalBundle, view: RepositoryView) -> HubEvidence:
        """Read what the plan needs to know beyond the listing, and nothing more."""
        if triage(bundle, view, create_pr=self.create_pr) != "changed":
            return HubEvidence()
        paths = view.base_paths(bundle.key)
        old = self._old_sidecar(paths[1], view.base_head)
        if old is None:
            return HubEvidence()
        sidecar, data = old
        from bundler.hub.publish.differences import extension_claims_problem, metric_changes

        problem = extension_claims_problem(sidecar, bundle.sidecar)
        copy = self._verified_copy(bundle.key, data, view.base_head, paths)
        if isinstance(copy, str):  # the Hub's copy fails verification
            return HubEvidence(old_sidecar=sidecar, extension_problem=problem or copy)
        old_files, old_metrics = copy
        from bundler.local.verify import manifest_digests  # loaded by _verified_copy

        if problem is None:
            problem = extension_predictions_problem(old_files, manifest_digests(bundle.archive))
        elif (changed := metric_changes(old_metrics, bundle.metrics_text)) is not None:
            problem += f"; its metrics differ: {changed}"
        return HubEvidence(old_sidecar=sidecar, extension_problem=problem)

    def _old_sidecar(self, path: str, commit: str) -> tuple[Sidecar, bytes] | None:
        """The Hub's sidecar at `path` and `commit`, parsed, with its bytes; None if
        unreadable."""
        try:
            data = self.session.read_small_file(path, commit)
            return Sidecar.model_validate_json(data), data
        except (TemporaryError, HubAccessError):
            raise
        except (HubError, ValueError):
            return None

    def _verified_copy(
        self, key: BundleId, old_data: bytes, commit: str, paths: tuple[str, str]
    ) -> tuple[dict[str, str], str] | str:
        """Download and verify the Hub's copy (its archive and sidecar at `paths`, the sidecar
        as read, `old_data`): the sha256 of each file its manifest lists, and its metrics; or
        why it fails verification. Only a changed bundle gets here: verifying loads with it, not
        with every upload, whose own bundles verified in a child or from the cache
        (bundler.hub.publish.upload; docs/performance.md)."""
        from bundler.local.verify import manifest_digests, read_bundle

        with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as staging:
            sidecar = Path(staging) / paths[1]  # the bytes read already, not again
            sidecar.parent.mkdir(parents=True)
            sidecar.write_bytes(old_data)
            archive = fetch_bundle(self.session, key, commit, {paths[0]}, Path(staging), paths)
            reading = read_bundle(archive, self.progress)
            verification = reading.verification()
            if not verification.ok or reading.metrics_text is None:
                return f"the Hub's copy fails verification ({verification.describe_failures()})"
            return manifest_digests(archive), reading.metrics_text
