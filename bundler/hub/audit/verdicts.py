"""The verdicts an audit keeps, so that running it again (after a rate limit stopped it, or the
next day) downloads only the bundles it has not judged yet.

A verdict is kept per endpoint, repository and the exact bytes it judged: the archive's sha256
(as the branch's listing gives it) and the sidecar's git blob id. A bundle whose files changed
has another key, so its old verdict is never found again. Each is one JSON file under HF_HOME
(`statics-bundler/audit/`), written atomically, and read back only when it is of this bundler
version (a newer one may verify more) and what it says agrees with what its key proves: the
sidecar it holds hashes to the listed blob id and names this bundle and this archive, and the
signer it names is the key of that sidecar's signature. What no key can prove (that the archive
matched the sidecar, the signature and the metrics) rests on this machine's own earlier
verification, as a local bundles folder's verification cache does. A verdict that cannot be
written (a read-only home) is simply not kept.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from huggingface_hub import constants
from pydantic import ValidationError

from bundler.core.errors import InputError, SignatureError, WriteError
from bundler.core.limits import MAX_VERDICT_BYTES
from bundler.core.model import Model
from bundler.core.version import VERSION
from bundler.hub.client.remote import git_blob_id
from bundler.local.fileio import read_bounded, write_atomically
from bundler.local.manifest import Sidecar
from bundler.local.signature import parse_signature

CACHE_FOLDER = ("statics-bundler", "audit")


@dataclass(frozen=True)
class VerdictKey:
    """Which bytes a verdict is about."""

    endpoint: str
    repo_id: str
    bundle_id: str
    archive: str
    """The archive's sha256 as listed (its git blob id, were it no LFS file)."""
    sidecar_blob_id: str

    @property
    def path(self) -> Path:
        named = "\0".join(
            (self.endpoint, self.repo_id, self.bundle_id, self.archive, self.sidecar_blob_id)
        )
        digest = hashlib.sha256(named.encode("utf-8")).hexdigest()
        return Path(constants.HF_HOME, *CACHE_FOLDER, f"{digest[:40]}.json")


class KeptVerdict(Model):
    """One bundle's verdict as kept: for a verified bundle, what its row is derived from."""

    bundler_version: str
    endpoint: str
    repo_id: str
    bundle_id: str
    archive: str
    sidecar_blob_id: str
    verdict: Literal["verified", "failed"]
    detail: str | None = None
    signer: str | None = None
    signature_problem: str | None = None
    sidecar: str | None = None
    """The sidecar's text, for a verified bundle."""
    metrics_json: str | None = None

    def key(self) -> VerdictKey:
        return VerdictKey(
            self.endpoint, self.repo_id, self.bundle_id, self.archive, self.sidecar_blob_id
        )

    def parsed_sidecar(self) -> Sidecar | None:
        """The sidecar it holds, when that is one."""
        if self.sidecar is None:
            return None
        try:
            return Sidecar.model_validate_json(self.sidecar)
        except ValidationError:
            return None


def recall(key: VerdictKey) -> KeptVerdict | None:
    """The verdict kept for exactly these bytes, if there is one worth believing."""
    try:
        kept = KeptVerdict.model_validate_json(read_bounded(key.path, MAX_VERDICT_BYTES))
    except (InputError, ValidationError):
        return None
    if kept.bundler_version != VERSION or kept.key() != key:
        return None
    if kept.verdict == "failed":
        return kept
    return kept if _proven(kept, key) else None


def _proven(kept: KeptVerdict, key: VerdictKey) -> bool:
    """Whether a verified verdict agrees with what its key proves (module docstring)."""
    sidecar = kept.parsed_sidecar()
    if sidecar is None or kept.sidecar is None or kept.metrics_json is None:
        return False
    if git_blob_id(kept.sidecar.encode("utf-8")) != key.sidecar_blob_id:
        return False
    if sidecar.bundle_id != key.bundle_id or sidecar.archive.sha256 != key.archive:
        return False
    if sidecar.signature is None:
        return kept.signer is None
    try:
        return parse_signature(sidecar.signature.sshsig).fingerprint == kept.signer
    except SignatureError:
        return False


def keep(verdict: KeptVerdict) -> None:
    """Keep `verdict` (best effort: one that cannot be written costs only a download)."""
    with contextlib.suppress(OSError, WriteError):
        write_atomically(verdict.key().path, verdict.model_dump_json().encode("utf-8"))
