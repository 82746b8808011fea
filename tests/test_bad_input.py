"""Bad requests against the running local host: the right status, problem details naming the
field at fault, and nothing written."""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import pytest
from host_process import REPO, HostProcess, host, park_session  # noqa: F401

SOURCES = str(REPO / "examples" / "sources")
GOOD = {"topic": "Event-driven agents", "minWords": 300, "maxWords": 600, "sources": [SOURCES]}
OWNER = "bad-input-owner"
UNKNOWN = "00000000-0000-0000-0000-000000000000"


def post(**changes: Any) -> dict[str, Any]:
    body = {**GOOD, **changes}
    return {k: v for k, v in body.items() if v is not ...}


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    status: int
    field: str | None = None  # the errors[].field expected (None: any)
    json_body: Any = None
    content: bytes | None = None
    headers: dict[str, str] = dataclass_field(default_factory=dict)


CASES: dict[str, Case] = {
    "malformed json": Case("POST", "/api/sessions", 400, content=b'{"topic": '),
    "json array body": Case("POST", "/api/sessions", 400, content=b"[1, 2]"),
    "empty body": Case("POST", "/api/sessions", 400, content=b""),
    "NaN is not json": Case("POST", "/api/sessions", 400, content=b'{"topic": "x", "minWords": NaN}'),
    "not utf-8": Case("POST", "/api/sessions", 400, content=b'{"topic": "\xff\xfe"}'),
    "missing topic": Case("POST", "/api/sessions", 400, "topic", post(topic=...)),
    "empty topic": Case("POST", "/api/sessions", 400, "topic", post(topic="")),
    "blank topic": Case("POST", "/api/sessions", 400, "topic", post(topic="   ")),
    "topic over 1000 chars": Case("POST", "/api/sessions", 400, "topic", post(topic="x" * 1001)),
    "topic not a string": Case("POST", "/api/sessions", 400, "topic", post(topic=42)),
    "minWords as string": Case("POST", "/api/sessions", 400, "minWords", post(minWords="300")),
    "minWords as float": Case("POST", "/api/sessions", 400, "minWords", post(minWords=300.0)),
    "minWords as bool": Case("POST", "/api/sessions", 400, "minWords", post(minWords=True)),
    "minWords above maxWords": Case("POST", "/api/sessions", 400, "minWords", post(minWords=800, maxWords=600)),
    "maxWords zero": Case("POST", "/api/sessions", 400, "maxWords", post(maxWords=0)),
    "unknown field": Case("POST", "/api/sessions", 400, "colour", post(colour="blue")),
    "sources not a list": Case("POST", "/api/sessions", 400, "sources", post(sources=SOURCES)),
    "empty source": Case("POST", "/api/sessions", 400, "sources", post(sources=[""])),
    "too many sources": Case("POST", "/api/sessions", 400, "sources", post(sources=[SOURCES] * 21)),
    "no sources and no web search": Case("POST", "/api/sessions", 400, "sources", post(sources=...)),
    "source file does not exist": Case("POST", "/api/sessions", 400, "sources", post(sources=["/no/such/folder"])),
    "tokenBudget as string": Case("POST", "/api/sessions", 400, "tokenBudget", post(tokenBudget="lots")),
    "tokenBudget zero": Case("POST", "/api/sessions", 400, "tokenBudget", post(tokenBudget=0)),
    "body over 64 kB": Case("POST", "/api/sessions", 413, content=json.dumps(post(topic="x" * 70_000)).encode()),
    "text/plain body": Case("POST", "/api/sessions", 415, content=json.dumps(GOOD).encode(),
                            headers={"Content-Type": "text/plain"}),
    "wrong method on collection": Case("PUT", "/api/sessions", 405, json_body=GOOD),
    "wrong method on a session": Case("PATCH", f"/api/sessions/{UNKNOWN}", 405, json_body={}),
    "unknown route": Case("GET", "/api/sessionz", 404),
    "limit zero": Case("GET", "/api/sessions?limit=0", 400, "limit"),
    "limit not a number": Case("GET", "/api/sessions?limit=ten", 400, "limit"),
    "limit too large": Case("GET", "/api/sessions?limit=1000", 400, "limit"),
    "garbage continuation": Case("GET", "/api/sessions?continuation=not-a-token", 400, "continuation"),
    "unknown session": Case("GET", f"/api/sessions/{UNKNOWN}", 404),
    "draft of unknown session": Case("GET", f"/api/sessions/{UNKNOWN}/draft", 404),
    "feedback to unknown session": Case("POST", f"/api/sessions/{UNKNOWN}/feedback", 404, json_body={"feedback": "x"}),
    "cancel unknown session": Case("POST", f"/api/sessions/{UNKNOWN}/cancel", 404),
    "delete unknown session": Case("DELETE", f"/api/sessions/{UNKNOWN}", 404),
    "overlong session id": Case("GET", f"/api/sessions/{'a' * 500}", 404),
    "garbled principal": Case("GET", "/api/sessions", 401, headers={"X-MS-CLIENT-PRINCIPAL": "%%%not base64%%%"}),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_request_is_refused_with_problem_details(host: HostProcess, case: Case) -> None:
    headers = {"X-MS-CLIENT-PRINCIPAL-ID": OWNER, **case.headers}
    if "X-MS-CLIENT-PRINCIPAL" in case.headers:
        headers.pop("X-MS-CLIENT-PRINCIPAL-ID")
    with host.client() as client:
        if case.content is not None:
            headers.setdefault("Content-Type", "application/json")
            response = client.request(case.method, case.path, content=case.content, headers=headers)
        elif case.json_body is not None:
            response = client.request(case.method, case.path, json=case.json_body, headers=headers)
        else:
            response = client.request(case.method, case.path, headers=headers)
    assert response.status_code == case.status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == case.status
    assert problem["type"] and problem["title"] and problem["detail"]
    fields = [e["field"] for e in problem["errors"]]
    if case.field is not None:
        assert any(f == case.field or (f or "").startswith((case.field + ".", case.field + "[")) for f in fields), problem
    if case.status == 405:
        assert response.headers["Allow"]
        assert case.method not in response.headers["Allow"]


def test_bad_feedback_on_a_real_session_names_the_field(host: HostProcess) -> None:
    services = host.services()
    try:
        session_id = park_session(services, "feedback-owner", status="completed")
    finally:
        services.close()
    with host.client("feedback-owner") as client:
        for body, field_name in (({"feedback": ""}, "feedback"), ({}, "feedback"),
                                 ({"feedback": "ok", "tone": "dry"}, "tone"), ({"feedback": ["a"]}, "feedback")):
            response = client.post(f"/api/sessions/{session_id}/feedback", json=body)
            assert response.status_code == 400, body
            assert field_name in [e["field"] for e in response.json()["errors"]]


def test_refused_requests_wrote_nothing(host: HostProcess) -> None:
    # Runs after the table (same module host): the owner who sent only bad requests has nothing.
    with host.client(OWNER) as client:
        listed = client.get("/api/sessions")
    assert listed.status_code == 200
    assert listed.json()["items"] == []
    services = host.services()
    try:
        assert services.store.list(OWNER).items == []
    finally:
        services.close()
