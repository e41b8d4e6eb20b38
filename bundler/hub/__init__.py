"""The Hub wing: everything that talks to a Hugging Face dataset repository.

The only importer of huggingface_hub. `session` wraps the client (errors, retries), `layout`
names the repository's paths, `rows` and `card` build what the viewer shows, `plan` decides what
an upload commits (pure, from values) and `publish` carries it out, `upload`, `download` and
`review` are the operations the commands call. It stands on the local format and the core, and
never imports typer or rich.
"""
