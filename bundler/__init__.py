"""statics-bundler: GPTNT statics outputs into verified, reproducible submission bundles.

The library is the product; the `bundler` command is a thin layer over it:

    from bundler import collect, verify, inspect_bundle
    from bundler.upload import upload
"""

from bundler.collect import CollectOptions, CollectReport, collect
from bundler.errors import BundlerError, HubError, InputError, UsageError, WriteError
from bundler.inspection import BundleInspection, inspect_bundle
from bundler.manifest import BundleClaim, Manifest, Sidecar
from bundler.schema import StaticsIdentity, StaticsRunMetadata
from bundler.verify import VerifyReport, verify

__all__ = [
    "BundleClaim",
    "BundleInspection",
    "BundlerError",
    "CollectOptions",
    "CollectReport",
    "HubError",
    "InputError",
    "Manifest",
    "Sidecar",
    "StaticsIdentity",
    "StaticsRunMetadata",
    "UsageError",
    "VerifyReport",
    "WriteError",
    "collect",
    "inspect_bundle",
    "verify",
]


def __getattr__(name: str) -> object:
    """The Hub stages load huggingface_hub, so they are imported only when asked for. The
    modules `bundler.upload` and `bundler.download` hold the functions of the same name."""
    if name in ("UploadOptions", "UploadReport"):
        from bundler import upload

        return getattr(upload, name)
    if name == "DownloadReport":
        from bundler import download

        return getattr(download, name)
    raise AttributeError(name)
