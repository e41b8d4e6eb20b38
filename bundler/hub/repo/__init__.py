"""The dataset repository's files: where each goes, the bundles fetched from it, the Markdown
posted on it.

`paths` lays the repository out (layout version 2: every bundle's files, the leaderboard's
tables, the task definitions, the card), `download` fetches bundles from it into a local folder,
verified (`bundler download`, and every other reader of a bundle on the Hub), and `markdown`
makes strangers' text inert in the pages posted on it. It stands on the Hub client, the local
bundle format and the core.
"""
