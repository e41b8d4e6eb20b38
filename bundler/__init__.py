"""statics-bundler: GPTNT statics outputs into verified, reproducible submission bundles.

The library is the product; the `bundler` command is a thin layer over it:

    from bundler import collect, verify, inspect_bundle
    from bundler.hub.publish.upload import upload

Names are loaded on first use (PEP 562), so `import bundler` (and every command's start-up)
pays only for the stages it actually uses; the Hub stages, which load huggingface_hub, most of
all. The wings below are `bundler.core`, `bundler.local` (the bundle format, no network),
`bundler.hub` and `bundler.cli`; see the README's "Architecture".
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bundler.core.errors import BundlerError, HubError, InputError, UsageError, WriteError
    from bundler.hub.publish.upload import UploadOptions, UploadReport
    from bundler.hub.repo.download import DownloadReport
    from bundler.local.collect import CollectOptions, CollectReport, collect
    from bundler.local.inspection import BundleInspection, inspect_bundle
    from bundler.local.manifest import BundleClaim, Manifest, Sidecar
    from bundler.local.schema import StaticsIdentity, StaticsRunMetadata
    from bundler.local.submitter import Submitter
    from bundler.local.verify import VerifyReport, verify

_HOMES = {
    "CollectOptions": "local.collect",
    "CollectReport": "local.collect",
    "collect": "local.collect",
    "BundlerError": "core.errors",
    "HubError": "core.errors",
    "InputError": "core.errors",
    "UsageError": "core.errors",
    "WriteError": "core.errors",
    "BundleInspection": "local.inspection",
    "inspect_bundle": "local.inspection",
    "BundleClaim": "local.manifest",
    "Manifest": "local.manifest",
    "Sidecar": "local.manifest",
    "StaticsIdentity": "local.schema",
    "StaticsRunMetadata": "local.schema",
    "Submitter": "local.submitter",
    "VerifyReport": "local.verify",
    "verify": "local.verify",
    "UploadOptions": "hub.publish.upload",
    "UploadReport": "hub.publish.upload",
    "DownloadReport": "hub.repo.download",
}

__all__ = [
    "BundleClaim",
    "BundleInspection",
    "BundlerError",
    "CollectOptions",
    "CollectReport",
    "DownloadReport",
    "HubError",
    "InputError",
    "Manifest",
    "Sidecar",
    "StaticsIdentity",
    "StaticsRunMetadata",
    "Submitter",
    "UploadOptions",
    "UploadReport",
    "UsageError",
    "VerifyReport",
    "WriteError",
    "collect",
    "inspect_bundle",
    "verify",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'bundler' has no attribute {name!r}")
    value = getattr(import_module(f"bundler.{home}"), name)
    globals()[name] = value
    return value
