"""The Hugging Face token as the command line takes it: `--token` when given, else none, so
that huggingface_hub resolves it as it does for `hf` (a CI job's exchanged token when
HF_OIDC_RESOURCE is set, else HF_TOKEN, else the stored login); cleaned as huggingface_hub
cleans HF_TOKEN, refused when no HTTP header could carry it, and never shown."""

from __future__ import annotations

import os

from bundler.core.errors import UsageError
from bundler.core.trusted import RESOURCE_VARIABLE

ENVIRONMENT_TOKENS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
"""Where huggingface_hub reads a token from the environment, in its order."""


def cleaned(token: str | None) -> str:
    """The token as huggingface_hub cleans HF_TOKEN: line breaks and surrounding spaces
    dropped, so a secret pasted from a CRLF file works as it does for `hf`."""
    return (token or "").replace("\r", "").replace("\n", "").strip()


def _environment_token() -> str | None:
    """The token huggingface_hub would take from the environment: HF_TOKEN, unless the CI's
    exchanged token comes first (HF_OIDC_RESOURCE set)."""
    if os.environ.get(RESOURCE_VARIABLE):
        return None
    return next((os.environ[name] for name in ENVIRONMENT_TOKENS if os.environ.get(name)), None)


def token_to_send(token: str | None) -> str | None:
    """`--token`, cleaned (an empty one means none); None leaves the token to huggingface_hub's
    own resolution. The token that would be sent, given or from the environment, is refused
    here, without showing it, when it could never be sent in an HTTP header."""
    checked = cleaned(token if token is not None else _environment_token())
    if checked and not (checked.isascii() and checked.isprintable() and " " not in checked):
        raise UsageError(
            "the token (--token or HF_TOKEN) holds characters no Hugging Face token has",
            hint="copy it again from https://huggingface.co/settings/tokens",
        )
    return cleaned(token) or None


def secrets_of(token: str | None) -> tuple[str, ...]:
    """What output must never show: the token as given and as sent, and the environment's."""
    given = (token, *(os.environ.get(name) for name in ENVIRONMENT_TOKENS))
    return tuple({value for raw in given for value in (raw, cleaned(raw)) if value})


def scrubbed(text: str | None, secrets: tuple[str, ...]) -> str | None:
    """`text` with every secret (see `secrets_of`) replaced by `***`."""
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
