"""Jinja templates shipped with the bundler (dataset card, pull-request description).

Kept at the top of the repository so maintainers find and edit them; packaged as
`bundler.templates` so an installed bundler can read them.
"""
