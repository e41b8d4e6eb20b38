"""The Hub wing: everything that talks to a Hugging Face dataset repository.

The only importer of huggingface_hub. Its sub-packages, each named by what it holds, from the
bottom up:

- `client`: one session over the Hub client (its errors read, reads retried, commits
  re-planned on a head that moved), what a token may do, the rate limits;
- `repo`: the repository's files: every path (`paths`), bundles fetched from it and verified
  (`download`, Stage 6), the Markdown posted on it made inert;
- `tasks`: the maintainers' task definitions, who may sign, and the size of the dataset split
  a task runs on;
- `leaderboard`: each bundle's row, a task's ranking, the Parquet tables, the dataset card, and
  a branch's tables caught up with its bundles;
- `maintain`: the maintainers' commands that change the rules and the board (`bundler init`,
  `card`, `tasks define`, `signers`), each one commit;
- `publish`: Stage 5, `bundler upload`: what to commit, planned from values, then carried out;
- `review`: Stage 7, `bundler review`: each pull request gathered, judged, acted on.

Each stands on those above it, on the local format and on the core; none imports typer or
rich.
"""
