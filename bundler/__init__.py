"""statics-bundler: GPTNT statics outputs into verified, reproducible submission bundles.

The library is the product; the `bundler` command is a thin layer over it:

    from bundler import collect, verify, inspect_bundle
"""

from bundler.collect import CollectOptions, CollectReport, collect
from bundler.errors import BundlerError, HubError, InputError, UsageError, WriteError
from bundler.manifest import BundleClaim, Manifest, Sidecar
from bundler.schema import StaticsIdentity, StaticsRunMetadata

__all__ = [
    "BundleClaim",
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
    "WriteError",
    "collect",
]
