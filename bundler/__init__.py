"""statics-bundler: GPTNT statics outputs into verified, reproducible submission bundles.

The library is the product; the `bundler` command is a thin layer over it:

    from bundler import collect, verify, inspect_bundle
    from bundler.upload import upload

Names are loaded on first use (PEP 562), so `import bundler` (and every command's start-up)
pays only for the stages it actually uses; the Hub stages, which load huggingface_hub, most of
all. The modules `bundler.upload` and `bundler.download` hold the functions of the same name.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bundler.collect import CollectOptions, CollectReport, collect
    from bundler.download import DownloadReport
    from bundler.errors import BundlerError, HubError, InputError, UsageError, WriteError
    from bundler.inspection import BundleInspection, inspect_bundle
    from bundler.manifest import BundleClaim, Manifest, Sidecar
    from bundler.schema import StaticsIdentity, StaticsRunMetadata
    from bundler.submitter import Submitter
    from bundler.upload import UploadOptions, UploadReport
    from bundler.verify import VerifyReport, verify

_HOMES = {
    "CollectOptions": "collect",
    "CollectReport": "collect",
    "collect": "collect",
    "BundlerError": "errors",
    "HubError": "errors",
    "InputError": "errors",
    "UsageError": "errors",
    "WriteError": "errors",
    "BundleInspection": "inspection",
    "inspect_bundle": "inspection",
    "BundleClaim": "manifest",
    "Manifest": "manifest",
    "Sidecar": "manifest",
    "StaticsIdentity": "schema",
    "StaticsRunMetadata": "schema",
    "Submitter": "submitter",
    "VerifyReport": "verify",
    "verify": "verify",
    "UploadOptions": "upload",
    "UploadReport": "upload",
    "DownloadReport": "download",
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


class _Package(ModuleType):
    """`bundler.collect` and `bundler.verify` name both a function and its module. Importing
    the module binds the package attribute to the module; the functions are the public names,
    so that binding is declined and the attribute resolves (lazily) to the function."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("collect", "verify") and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
