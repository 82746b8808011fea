"""OpenAIModel and the providers, with the real openai SDK against the local fake server."""

from __future__ import annotations

import json
import sys
from typing import Iterator

import openai
import pytest

try:  # tests/ on sys.path (rootdir-relative imports) or the repository root (tests as a package)
    from fake_openai import Citation, FakeOpenAIServer, Reply, TokenCounts, instance_of
except ImportError:  # pragma: no cover - depends on how pytest was configured
    from tests.fake_openai import Citation, FakeOpenAIServer, Reply, TokenCounts, instance_of

from blogwriter.briefs import DraftOutput, ResearchBrief, ResearchOutput, ReviewBrief, ReviewOutput, WriteBrief
from blogwriter.errors import ConfigurationError, ModelError
from blogwriter.models.base import ModelRequest
from blogwriter.models.openai import OpenAIModel, _make_strict, strict_json_schema
from blogwriter.models.providers import (
    RemoteModelCallBlocked,
    block_remote_model_calls,
    build_model_set,
    guarded_http_client,
    is_loopback_host,
    remote_model_calls_blocked,
)
from blogwriter.settings import ModelSettings
from blogwriter.state import Usage

RESEARCH = {
    "findings": [
        {"claim": "Python 3.11 is faster", "quote": "3.11 is up to 60% faster.", "passage": 2, "url": None, "title": None}
    ],
    "refinements": ["benchmarks"],
}
DRAFT = {"title": "Fast Python", "body": "Python got faster [1]."}
REVIEW = {"approved": False, "notes": "Add numbers.", "research_requests": ["benchmark figures"]}


@pytest.fixture(autouse=True)
def _no_remote_calls() -> Iterator[None]:
    before = remote_model_calls_blocked()
    block_remote_model_calls(True)
    yield
    block_remote_model_calls(before)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def client_for(srv: FakeOpenAIServer, *, max_retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(api_key="test-key", base_url=srv.base_url, max_retries=max_retries, timeout=10,
                         http_client=guarded_http_client(10))


def research_request(**changes: object) -> ModelRequest[ResearchOutput]:
    brief = ResearchBrief(topic="Python speed", min_words=100, max_words=200, round=1)
    fields: dict = dict(agent="researcher", brief=brief, instructions="You research.", prompt="Find facts.",
                        output_type=ResearchOutput, max_output_tokens=900)
    fields.update(changes)
    return ModelRequest(**fields)


def draft_request() -> ModelRequest[DraftOutput]:
    brief = WriteBrief(topic="Python speed", min_words=100, max_words=200, findings=[])
    return ModelRequest(agent="author", brief=brief, instructions="You write.", prompt="Write.", output_type=DraftOutput)


def review_request() -> ModelRequest[ReviewOutput]:
    brief = ReviewBrief(topic="Python speed", min_words=100, max_words=200, title="t", draft="d", findings=[])
    return ModelRequest(agent="reviewer", brief=brief, instructions="You review.", prompt="Review.",
                        output_type=ReviewOutput)


# --- the Responses API request ------------------------------------------------------------------


def test_responses_request_is_stateless_and_asks_for_the_strict_schema(server: FakeOpenAIServer) -> None:
    server.script(json.dumps(RESEARCH))
    model = OpenAIModel(client_for(server), "gpt-test")

    model.respond(research_request())

    (req,) = server.requests
    assert req.path == "/v1/responses"
    body = req.body
    assert body["model"] == "gpt-test"
    assert body["store"] is False
    assert "previous_response_id" not in body and "conversation" not in body
    assert body["instructions"] == "You research."
    assert body["input"] == "Find facts."
    assert body["max_output_tokens"] == 900
    assert "tools" not in body
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["strict"] is True and fmt["name"] == "ResearchOutput"
    assert fmt["schema"] == strict_json_schema(ResearchOutput)
    fact = fmt["schema"]["$defs"]["FoundFact"]
    assert fact["additionalProperties"] is False
    assert set(fact["required"]) == {"claim", "quote", "passage", "url", "title"}
    assert {"type": "null"} in fact["properties"]["url"]["anyOf"]
    assert req.headers["authorization"] == "Bearer test-key"


@pytest.mark.parametrize(
    ("request_factory", "answer", "expected"),
    [
        (research_request, RESEARCH, ResearchOutput.model_validate(RESEARCH)),
        (draft_request, DRAFT, DraftOutput.model_validate(DRAFT)),
        (review_request, REVIEW, ReviewOutput.model_validate(REVIEW)),
    ],
    ids=["research", "draft", "review"],
)
def test_answers_parse_into_the_agents_output_types(server: FakeOpenAIServer, request_factory, answer, expected) -> None:
    server.script(answer)
    response = OpenAIModel(client_for(server), "gpt-test").respond(request_factory())
    assert response.output == expected
    assert response.model == "gpt-test"


def test_usage_of_one_call_is_reported(server: FakeOpenAIServer) -> None:
    server.script(Reply(text=DRAFT, usage=TokenCounts(input=120, output=80, reasoning=30)))
    response = OpenAIModel(client_for(server), "gpt-test").respond(draft_request())
    assert response.usage == Usage(InputTokens=120, OutputTokens=80, ReasoningTokens=30, TotalTokens=200, Calls=1)


def test_missing_usage_counts_as_zero(server: FakeOpenAIServer) -> None:
    server.script(Reply(text=DRAFT, usage=None))
    response = OpenAIModel(client_for(server), "gpt-test").respond(draft_request())
    assert response.usage == Usage(Calls=1)


def test_output_allowance_is_capped_by_the_settings(server: FakeOpenAIServer) -> None:
    server.script(DRAFT)
    OpenAIModel(client_for(server), "gpt-test", max_output_tokens=500).respond(draft_request())
    assert server.requests[0].body["max_output_tokens"] == 500


# --- bad answers ------------------------------------------------------------------------------


def test_malformed_answer_is_retried_once_with_the_error_and_usage_sums(server: FakeOpenAIServer) -> None:
    server.script(
        Reply(text='{"title": "Fast Python"}', usage=TokenCounts(10, 5, 1)),
        Reply(text=DRAFT, usage=TokenCounts(20, 7, 2)),
    )
    response = OpenAIModel(client_for(server), "gpt-test").respond(draft_request())

    assert response.output.title == "Fast Python"
    assert response.usage == Usage(InputTokens=30, OutputTokens=12, ReasoningTokens=3, TotalTokens=42, Calls=2)
    first, second = server.requests
    assert first.body["input"] == "Write."
    assert second.body["input"].startswith("Write.\n\n")
    assert "body" in second.body["input"] and "Field required" in second.body["input"]
    assert second.body["text"] == first.body["text"]


def test_answer_still_bad_after_the_retry_raises_model_error(server: FakeOpenAIServer) -> None:
    server.script(Reply(text="not json at all", usage=TokenCounts(10, 5)), Reply(text='{"approved": "maybe"}',
                                                                                 usage=TokenCounts(11, 6)))
    with pytest.raises(ModelError, match="ReviewOutput") as caught:
        OpenAIModel(client_for(server), "gpt-test").respond(review_request())
    assert len(server.requests) == 2
    assert caught.value.usage == Usage(InputTokens=21, OutputTokens=11, TotalTokens=32, Calls=2)


def test_truncated_answer_raises_without_a_retry(server: FakeOpenAIServer) -> None:
    server.script(Reply(text='{"title": "Fa', incomplete="max_output_tokens"))
    with pytest.raises(ModelError, match="max_output_tokens"):
        OpenAIModel(client_for(server), "gpt-test").respond(draft_request())
    assert len(server.requests) == 1


# --- resilience -------------------------------------------------------------------------------


def test_rate_limit_then_success_is_retried_by_the_sdk(server: FakeOpenAIServer) -> None:
    server.script(Reply(status=429, error_message="slow down"), Reply(text=DRAFT, usage=TokenCounts(10, 5)))
    response = OpenAIModel(client_for(server, max_retries=2), "gpt-test").respond(draft_request())
    assert response.output.title == "Fast Python"
    assert response.usage.Calls == 2  # two HTTP calls, one model answer
    assert response.usage.TotalTokens == 15
    assert len(server.requests) == 2


def test_server_errors_past_the_retries_raise_model_error_naming_status_and_provider(server: FakeOpenAIServer) -> None:
    server.script(Reply(status=500, error_message="boom"), Reply(status=500, error_message="boom again"))
    model = OpenAIModel(client_for(server, max_retries=1), "gpt-test", provider="azure-openai")
    with pytest.raises(ModelError, match=r"azure-openai returned HTTP 500.*boom again"):
        model.respond(draft_request())
    assert len(server.requests) == 2


# --- web search -------------------------------------------------------------------------------


def test_web_search_passes_the_hosted_tool_and_sources_findings_from_citations(server: FakeOpenAIServer) -> None:
    answer = json.dumps({
        "findings": [
            {"claim": "CPython 3.11 added adaptive specialization", "quote": "PEP 659 ...", "passage": None,
             "url": None, "title": None},
            {"claim": "Nobody can say where this came from", "quote": "...", "passage": None, "url": None,
             "title": None},
            {"claim": "Given passage fact", "quote": "q", "passage": 1, "url": None, "title": None},
        ],
        "refinements": [],
    })
    server.script(Reply(text=answer, citations=(Citation("https://peps.python.org/pep-0659/", "PEP 659", "PEP 659 ..."),)))
    model = OpenAIModel(client_for(server), "gpt-test", web_search=True)

    response = model.respond(research_request(web_search=True))

    assert server.requests[0].body["tools"] == [{"type": "web_search"}]
    claims = [(f.claim, f.url, f.title) for f in response.output.findings]
    assert claims == [
        ("CPython 3.11 added adaptive specialization", "https://peps.python.org/pep-0659/", "PEP 659"),
        ("Given passage fact", None, None),
    ]


def test_web_search_is_not_sent_when_the_provider_lacks_it(server: FakeOpenAIServer) -> None:
    server.script(RESEARCH)
    OpenAIModel(client_for(server), "gpt-test", web_search=False).respond(research_request(web_search=True))
    assert "tools" not in server.requests[0].body


# --- chat completions -------------------------------------------------------------------------


def test_chat_path_sends_messages_and_json_schema_and_counts_usage(server: FakeOpenAIServer) -> None:
    server.script(Reply(text=REVIEW, usage=TokenCounts(input=40, output=9, reasoning=4)))
    model = OpenAIModel(client_for(server), "llama3", api="chat", chat_token_param="max_tokens")

    response = model.respond(review_request())

    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "llama3"
    assert req.body["messages"] == [{"role": "system", "content": "You review."}, {"role": "user", "content": "Review."}]
    assert req.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "ReviewOutput", "schema": strict_json_schema(ReviewOutput), "strict": True},
    }
    assert req.body["max_tokens"] == 4_000
    assert "tools" not in req.body and "store" not in req.body
    assert response.output == ReviewOutput.model_validate(REVIEW)
    assert response.usage == Usage(InputTokens=40, OutputTokens=9, ReasoningTokens=4, TotalTokens=49, Calls=1)


def test_chat_malformed_answer_is_retried_in_the_user_message(server: FakeOpenAIServer) -> None:
    server.script("{}", REVIEW)
    OpenAIModel(client_for(server), "llama3", api="chat").respond(review_request())
    retry = server.requests[1].body
    assert "max_completion_tokens" in retry
    assert retry["messages"][1]["content"].startswith("Review.\n\nYour previous answer was rejected")


def test_chat_cannot_have_web_search() -> None:
    with pytest.raises(ValueError):
        OpenAIModel(openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1"), "m", api="chat", web_search=True)


# --- the guard --------------------------------------------------------------------------------


def test_guard_refuses_a_non_loopback_base_url_before_any_connection() -> None:
    client = openai.OpenAI(api_key="x", base_url="http://model.example.invalid/v1", max_retries=3,
                           http_client=guarded_http_client(5))
    with pytest.raises(RemoteModelCallBlocked, match="model.example.invalid"):
        OpenAIModel(client, "gpt-test").respond(draft_request())


def test_guard_lets_loopback_through_and_can_be_switched_off(server: FakeOpenAIServer) -> None:
    server.script(DRAFT)
    OpenAIModel(client_for(server), "gpt-test").respond(draft_request())
    block_remote_model_calls(False)
    assert not remote_model_calls_blocked()


def test_guard_covers_clients_built_by_build_model_set() -> None:
    models = build_model_set(ModelSettings(openai_base_url="http://model.example.invalid/v1", model="m",
                                           max_retries=2))
    with pytest.raises(RemoteModelCallBlocked, match="model.example.invalid"):
        models.author.respond(draft_request())
    models.close()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("127.0.0.2", True),
     ("api.openai.com", False), ("10.0.0.1", False), ("x.openai.azure.com", False), ("localhost.evil.com", False)],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


# --- providers from settings ------------------------------------------------------------------


def test_openai_settings_build_one_model_per_agent_on_one_client(server: FakeOpenAIServer) -> None:
    settings = ModelSettings(openai_api_key="sk-test", openai_base_url=server.base_url, model="base-model",
                             research_model="cheap-model", review_model="strict-model", max_retries=0)
    models = build_model_set(settings)
    server.script(RESEARCH, DRAFT, REVIEW)

    models.researcher.respond(research_request())
    models.author.respond(draft_request())
    models.reviewer.respond(review_request())

    assert [r.body["model"] for r in server.requests] == ["cheap-model", "base-model", "strict-model"]
    assert all(r.path == "/v1/responses" for r in server.requests)
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert models.researcher.client is models.author.client is models.reviewer.client
    models.close()


def test_official_openai_defaults_to_a_model_and_web_search() -> None:
    models = build_model_set(ModelSettings(openai_api_key="sk-test"))
    assert isinstance(models.author, OpenAIModel)
    assert models.author.model == "gpt-4.1-mini"
    assert models.researcher.web_search is True
    assert str(models.author.client.base_url).startswith("https://api.openai.com/v1")
    models.close()


def test_compatible_chat_server_needs_no_key_and_gets_no_web_search(server: FakeOpenAIServer) -> None:
    settings = ModelSettings(openai_base_url=server.base_url, api="chat", model="qwen2.5", max_retries=0)
    models = build_model_set(settings)
    server.script(REVIEW)

    models.reviewer.respond(review_request())

    (req,) = server.requests
    assert req.path == "/v1/chat/completions" and req.body["model"] == "qwen2.5"
    assert req.body["max_tokens"] == 4_000
    assert req.headers["authorization"] == "Bearer not-needed"
    assert models.researcher.web_search is False
    models.close()


def test_azure_with_a_key_calls_the_deployment(server: FakeOpenAIServer) -> None:
    settings = ModelSettings(azure_endpoint=server.endpoint, azure_deployment="blog-gpt", azure_api_key="azure-key",
                             azure_api_version="2025-04-01-preview", max_retries=0)
    models = build_model_set(settings)
    server.script(DRAFT, REVIEW)

    models.author.respond(draft_request())
    (resp_req,) = server.requests
    assert resp_req.path == "/openai/responses"
    assert resp_req.query == {"api-version": "2025-04-01-preview"}
    assert resp_req.body["model"] == "blog-gpt"
    assert resp_req.headers["api-key"] == "azure-key"
    assert models.researcher.web_search is True  # "auto" is on for Azure Responses
    models.close()

    chat = build_model_set(ModelSettings(azure_endpoint=server.endpoint, azure_deployment="blog-gpt",
                                         azure_api_key="azure-key", api="chat", review_model="review-dep",
                                         max_retries=0))
    chat.reviewer.respond(review_request())
    assert server.requests[1].path == "/openai/deployments/review-dep/chat/completions"
    chat.close()


def test_azure_without_a_key_uses_an_entra_token(server: FakeOpenAIServer) -> None:
    settings = ModelSettings(azure_endpoint=server.endpoint, azure_deployment="blog-gpt", max_retries=0)
    models = build_model_set(settings, azure_token_provider=lambda: "entra-token")
    server.script(DRAFT)
    models.author.respond(draft_request())
    assert server.requests[0].headers["authorization"] == "Bearer entra-token"
    assert "api-key" not in server.requests[0].headers
    models.close()


def test_azure_without_key_or_token_provider_defers_the_credential(server: FakeOpenAIServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # With azure-identity unimportable, building still works: the credential is made on first use.
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    models = build_model_set(ModelSettings(azure_endpoint=server.endpoint, azure_deployment="d", max_retries=0))
    assert models.author.model == "d"
    with pytest.raises(ImportError):
        models.author.respond(draft_request())
    assert server.requests == []
    models.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (ModelSettings(), "no model configured"),
        (ModelSettings(azure_endpoint="https://x.openai.azure.com"), "AZURE_OPENAI_DEPLOYMENT"),
        (ModelSettings(openai_base_url="http://127.0.0.1:11434/v1", api="chat"), "BLOGWRITER_MODEL"),
        (ModelSettings(openai_base_url="https://api.openai.com/v1"), "OPENAI_API_KEY"),
        (ModelSettings(openai_base_url="http://127.0.0.1:1/v1", model="m", api="chat", web_search="on"),
         "Responses API"),
        (ModelSettings(openai_base_url="localhost:8080", model="m"), "http"),
        (ModelSettings(openai_api_key="k", offline=True), "OFFLINE"),
    ],
    ids=["nothing", "azure-no-deployment", "compatible-no-model", "official-no-key", "chat-web-on", "bad-url",
         "offline"],
)
def test_incomplete_settings_raise_configuration_error(settings: ModelSettings, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build_model_set(settings)


@pytest.mark.parametrize(
    ("base_url", "api", "web", "expected"),
    [
        (None, "responses", "auto", True),
        ("http://127.0.0.1:1/v1", "responses", "auto", False),
        ("http://127.0.0.1:1/v1", "responses", "on", True),
        (None, "responses", "off", False),
        (None, "chat", "auto", False),
    ],
    ids=["official-auto", "other-auto", "other-on", "official-off", "chat-auto"],
)
def test_web_search_setting(base_url: str | None, api: str, web: str, expected: bool) -> None:
    models = build_model_set(ModelSettings(openai_api_key="k", openai_base_url=base_url, model="m", api=api,
                                           web_search=web))
    assert models.researcher.web_search is expected
    models.close()


# --- schema helpers and the fake server itself ------------------------------------------------


@pytest.mark.parametrize("output_type", [ResearchOutput, DraftOutput, ReviewOutput])
def test_fallback_strict_schema_converter_matches_the_sdk(output_type) -> None:
    assert _make_strict(output_type.model_json_schema()) == strict_json_schema(output_type)


def test_schema_filling_server_answers_any_schema_validly() -> None:
    with FakeOpenAIServer(fill_schema=True) as srv:
        client = client_for(srv)
        research = OpenAIModel(client, "m").respond(research_request())
        review = OpenAIModel(client, "m", api="chat").respond(review_request())
    assert research.output.findings[0].claim == "claim example"
    assert isinstance(review.output, ReviewOutput)
    assert instance_of(strict_json_schema(DraftOutput)) == {"title": "title example", "body": "body example"}


def test_fake_server_reports_unexpected_calls_and_unused_answers() -> None:
    srv = FakeOpenAIServer().start()
    try:
        with pytest.raises(ModelError, match="400"):
            OpenAIModel(client_for(srv, max_retries=3), "m").respond(draft_request())
        assert len(srv.requests) == 1  # the SDK did not retry the unexpected call
    finally:
        srv.stop()
    with pytest.raises(AssertionError, match="unexpected calls"):
        srv.assert_done()
    srv2 = FakeOpenAIServer()
    with pytest.raises(AssertionError, match="never requested"):
        with srv2:
            srv2.script(DRAFT)


def test_openai_module_reexports_the_provider_entry_points(server: FakeOpenAIServer) -> None:
    from blogwriter.models import openai as openai_module

    models = openai_module.build_model_set(ModelSettings(openai_base_url=server.base_url, model="m", max_retries=0))
    assert isinstance(models.author, OpenAIModel)
    models.close()
    openai_module.block_remote_model_calls(False)
    assert not remote_model_calls_blocked()


def test_estimate_counts_the_schema_and_the_capped_allowance() -> None:
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1")
    request = draft_request()
    uncapped = OpenAIModel(client, "m").estimate_tokens(request)
    capped = OpenAIModel(client, "m", max_output_tokens=1_000).estimate_tokens(request)
    assert uncapped - capped == request.max_output_tokens - 1_000
    assert uncapped > (len(request.instructions) + len(request.prompt)) // 4 + request.max_output_tokens
    client.close()


def test_failure_on_the_retry_keeps_the_first_attempts_usage(server: FakeOpenAIServer) -> None:
    server.script(Reply(text="{}", usage=TokenCounts(10, 5)), Reply(status=500))
    with pytest.raises(ModelError, match="HTTP 500") as caught:
        OpenAIModel(client_for(server), "gpt-test").respond(draft_request())
    assert caught.value.usage == Usage(InputTokens=10, OutputTokens=5, TotalTokens=15, Calls=1)
