"""The local bundle format: discover and read runs, archive them, derive and check claims.

Discover, read and validate runs (`discover`, `runs`, `validation`, `schema`), archive them
(`archive`, `manifest`, `claim`, `collect`), check and show bundles (`verify`, `inspection`,
`diff`) and export them for GPTNT (`export`). Nothing here touches the network or a terminal:
it imports only `bundler.core`, never the Hub wing, huggingface_hub, typer or rich.
"""
