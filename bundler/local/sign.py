"""Stage: sign bundles already made, so that a leaderboard can tell who vouches for each.

A bundle is signed only once it verifies: a signature says "I made these bytes", and nobody
should say that of a broken or tampered bundle. The signature goes into the sidecar (which is
written again, atomically, under the bundles folder's lock); the archive is not touched, so its
sha256, its name and everything else about it stay as they were.

A signature already there is never dropped silently: the same key's is left as it is, and
another key's is replaced only when the caller says so.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink

if TYPE_CHECKING:
    from bundler.local.signature import Signer

SignOutcomeKind = Literal["signed", "already-signed", "replaced", "refused"]


class SignedBundle(Model):
    """What signing did to one bundle. `signer` is the fingerprint of the key whose signature
    the sidecar now holds (None for a refused bundle that holds none)."""

    archive: str
    bundle_id: str | None
    outcome: SignOutcomeKind
    signer: str | None
    detail: str


class SignReport(Model):
    bundles: list[SignedBundle]

    @property
    def exit_code(self) -> int:
        return 1 if any(bundle.outcome == "refused" for bundle in self.bundles) else 0


def sign(
    paths: list[Path],
    key: Path,
    *,
    replace: bool = False,
    lock_wait: float = 0,
    progress: ProgressSink | None = None,
) -> SignReport:
    """Sign every bundle at or below `paths` with `key` (bundler.local.signature.Signer).

    Raises SignatureError when the key cannot be used at all (nothing is signed then),
    UsageError for a path that is no bundle, BundlesLockedError when another bundler run holds
    a bundles folder. The report models load with collect's; what signs, only here."""
    from bundler.local.layout import find_archives
    from bundler.local.lock import bundles_lock
    from bundler.local.signature import Signer

    signer = Signer(key)
    archives = find_archives(paths)
    progress = progress or NoProgress()
    with ExitStack() as locks:
        for folder in sorted({archive.parent.parent for archive in archives}):
            # <folder>/<player>/<target>.tar.zst: the folder collect and upload lock
            locks.enter_context(
                bundles_lock(folder, operation="sign", wait=lock_wait, create=False)
            )
        return SignReport(
            bundles=[_sign_one(archive, signer, replace, progress) for archive in archives]
        )


def _sign_one(archive: Path, signer: Signer, replace: bool, progress: ProgressSink) -> SignedBundle:
    from bundler.local.claim import sidecar_bytes
    from bundler.local.fileio import write_atomically
    from bundler.local.layout import sidecar_of
    from bundler.local.manifest import BundleSignature
    from bundler.local.verify import read_bundle

    reading = read_bundle(archive, progress)
    verification = reading.verification()

    def outcome(kind: SignOutcomeKind, detail: str, by: str | None) -> SignedBundle:
        return SignedBundle(
            archive=str(archive),
            bundle_id=verification.bundle_id,
            outcome=kind,
            signer=by,
            detail=detail,
        )

    if not verification.ok or reading.sidecar is None:
        failures = verification.describe_failures()
        return outcome("refused", f"fails verification: {failures}", None)
    signature = signer.sign(archive)
    previous = reading.signer
    if previous == signature.fingerprint:
        return outcome("already-signed", "already signed by this key", previous)
    if previous is not None and not replace:
        return outcome("refused", f"already signed by another key, {previous}", previous)
    signed = reading.sidecar.model_copy(
        update={"signature": BundleSignature(sshsig=signature.armored())}
    )
    write_atomically(sidecar_of(archive), sidecar_bytes(signed))
    if previous is None:
        return outcome("signed", "", signature.fingerprint)
    return outcome("replaced", f"replaced the signature of {previous}", signature.fingerprint)
