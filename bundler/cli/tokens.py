"""The Hugging Face token as the command line takes it: cleaned as huggingface_hub cleans
HF_TOKEN, refused when no HTTP header could carry it, and never shown."""

from __future__ import annotations

from bundler.core.errors import UsageError


def cleaned(token: str | None) -> str:
    """The token as huggingface_hub cleans HF_TOKEN: line breaks and surrounding spaces
    dropped, so a secret pasted from a CRLF file works as it does for `hf`."""
    return (token or "").replace("\r", "").replace("\n", "").strip()


def token_to_send(token: str | None) -> str | None:
    """The token to send; an empty one means none, so the client may fall back to the login.
    One that could never be sent in an HTTP header is refused here, without showing it."""
    sent = cleaned(token)
    if sent and not (sent.isascii() and sent.isprintable() and " " not in sent):
        raise UsageError(
            "the token (--token or HF_TOKEN) holds characters no Hugging Face token has",
            hint="copy it again from https://huggingface.co/settings/tokens",
        )
    return sent or None


def secrets_of(token: str | None) -> tuple[str, ...]:
    """What output must never show: the token as given and as sent."""
    return tuple({value for value in (token, cleaned(token)) if value})


def scrubbed(text: str | None, secrets: tuple[str, ...]) -> str | None:
    """`text` with every secret (see `secrets_of`) replaced by `***`."""
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
