"""Whole sessions on a real model client: the official openai SDK against a local server that
answers any JSON schema with a valid instance (as an unseen compatible server would). Checks the
CLI and the HTTP API complete, the document's tokens equal what the server reported, and no
request carries conversation state."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from blogwriter import cli
from blogwriter.settings import Settings
from blogwriter.state import SessionDocument, SessionStatus
from blogwriter.wiring import build_services
from conftest import EXAMPLE_SOURCES
from fake_openai import FakeOpenAIServer, TokenCounts
from host_process import start_host, wait_until

USAGE = TokenCounts(input=123, output=45, reasoning=6)


@pytest.fixture
def server():
    with FakeOpenAIServer(fill_schema=True, default_usage=USAGE) as srv:
        yield srv


def model_env(srv: FakeOpenAIServer, api: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test-key", "BLOGWRITER_MODEL": "unseen-model",
            "BLOGWRITER_MODEL_API": api, "BLOGWRITER_MODEL_MAX_RETRIES": "0"}


def only_session(home: Path) -> SessionDocument:
    services = build_services(Settings.from_env({"BLOGWRITER_HOME": str(home)}, local=True))
    try:
        [doc] = services.store.list("local").items
        return doc
    finally:
        services.close()


def assert_stateless(srv: FakeOpenAIServer) -> None:
    assert srv.requests, "the model was never called"
    for r in srv.requests:
        assert r.body.get("model") == "unseen-model"
        assert "previous_response_id" not in r.body and "conversation" not in r.body
        if r.api == "responses":
            assert r.body.get("store") is False
        assert r.json_schema is not None and r.json_schema.get("additionalProperties") is False


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_cli_write_completes_and_counts_every_token(api, server, monkeypatch, tmp_path, capsys) -> None:
    for k, v in model_env(server, api).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("BLOGWRITER_HOME", str(tmp_path / "home"))
    rc = cli.main(["write", "How BlogWriter routes work between agents", "--min-words", "300", "--max-words", "500",
                   "--source", str(EXAMPLE_SOURCES), "--out", str(tmp_path / "post.md")])
    doc = only_session(tmp_path / "home")
    assert rc == 0 and doc.State.Status is SessionStatus.COMPLETED, doc.State.Error
    calls = len(server.requests)
    assert doc.State.TokenUsage.InputTokens == calls * USAGE.input
    assert doc.State.TokenUsage.OutputTokens == calls * USAGE.output
    assert doc.State.TokenUsage.ReasoningTokens == calls * USAGE.reasoning
    assert doc.State.TokenUsage.TotalTokens == calls * (USAGE.input + USAGE.output)
    assert_stateless(server)
    assert (tmp_path / "post.md").read_text().startswith("# ")


def test_without_sources_a_model_writes_from_its_own_knowledge_and_says_so(server, monkeypatch, tmp_path) -> None:
    for k, v in model_env(server, "chat").items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("BLOGWRITER_HOME", str(tmp_path / "home"))
    rc = cli.main(["write", "Why queues deliver at least once", "--min-words", "100", "--max-words", "300"])
    doc = only_session(tmp_path / "home")
    assert rc == 0 and doc.State.Status is SessionStatus.COMPLETED, doc.State.Error
    assert doc.State.ResearchFindings
    assert {f.Source.Kind for f in doc.State.ResearchFindings} == {"model"}
    assert all("unverified" in f.Source.Title for f in doc.State.ResearchFindings)


def test_budget_smaller_than_one_call_fails_before_any_request(server, monkeypatch, tmp_path, capsys) -> None:
    for k, v in model_env(server, "responses").items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("BLOGWRITER_HOME", str(tmp_path / "home"))
    rc = cli.main(["write", "Budgets", "--min-words", "100", "--max-words", "200", "--token-budget", "50",
                   "--source", str(EXAMPLE_SOURCES)])
    doc = only_session(tmp_path / "home")
    assert rc == cli.EXIT_FAILED
    assert doc.State.Status is SessionStatus.FAILED and "token budget" in doc.State.Error
    assert server.requests == []
    assert "token budget" in capsys.readouterr().err


def test_http_api_completes_a_session_on_the_model(server, tmp_path) -> None:
    env = model_env(server, "responses") | {"BLOGWRITER_OFFLINE": "false"}
    host = start_host(tmp_path / "host", extra_env=env)
    try:
        with host.client() as client:
            r = client.post("/api/sessions", json={"topic": "How the sweeper heals lost messages", "minWords": 200,
                                                   "maxWords": 400, "sources": [str(EXAMPLE_SOURCES)]})
            assert r.status_code == 202, r.text
            sid = r.json()["id"]
            view = wait_until(lambda: (v := client.get(f"/api/sessions/{sid}").json())["status"] != "running" and v,
                              timeout=90, what="the session to finish")
            assert view["status"] == "completed", view
            calls = len(server.requests)
            assert view["tokenUsage"]["total"] == calls * (USAGE.input + USAGE.output)
            assert view["tokenUsage"]["calls"] == calls
            assert client.get(f"/api/sessions/{sid}/draft").status_code == 200
        assert_stateless(server)
    finally:
        assert host.stop() == 0
