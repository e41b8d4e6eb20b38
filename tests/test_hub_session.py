"""The Hub session against the test Hub, through the real client: who it says it is (the
User-Agent every request carries), and what each failure the client raises becomes (one named
error of bundler.core.errors, with its fields)."""

from __future__ import annotations

from conftest import WRITE_TOKEN
from hubserver import HubServer

from bundler.core.version import VERSION
from bundler.hub.client.session import HubSession


def test_every_request_names_the_bundler_and_its_version(hub: HubServer, repo_id: str) -> None:
    """`HfApi(library_name=..., library_version=...)`: the Hub's logs tell our requests from any
    other client's. The API calls and the one-GET file reads (their own headers) alike."""
    hub.create_repo(repo_id, files={"a.json": b"{}"})
    hub.reset_requests()
    session = HubSession(repo_id, token=WRITE_TOKEN)
    head = session.head("main")
    assert session.read_small_file("a.json", head) == b"{}"
    session.whoami()
    agents = [record.user_agent or "" for record in hub.requests()]
    assert len(agents) == 3
    assert all(agent.startswith(f"statics-bundler/{VERSION};") for agent in agents), agents
