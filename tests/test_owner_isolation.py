"""Owners are partitions: another owner's session is a 404 on every route, never a 403 or a leak."""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest
from host_process import REPO, HostProcess, host, park_session, start_host, wait_until  # noqa: F401

from blogwriter.identity import encode_principal

SOURCES = str(REPO / "examples" / "sources")
POST = {"topic": "Owner isolation", "minWords": 300, "maxWords": 600, "sources": [SOURCES]}
OID = "http://schemas.microsoft.com/identity/claims/objectidentifier"


def as_principal_id(user: str) -> dict[str, str]:
    return {"X-MS-CLIENT-PRINCIPAL-ID": user}


def as_principal_claims(oid: str) -> dict[str, str]:
    return {"X-MS-CLIENT-PRINCIPAL": encode_principal("", claims=[{"typ": OID, "val": oid}, {"typ": "name", "val": "B"}])}


@pytest.fixture(scope="module")
def a_session(host: HostProcess) -> str:
    with host.client() as client:
        response = client.post("/api/sessions", json=POST, headers=as_principal_id("owner-a"))
        assert response.status_code == 202, response.text
        session_id = response.json()["id"]
        wait_until(lambda: client.get(f"/api/sessions/{session_id}", headers=as_principal_id("owner-a")).json()["status"]
                   == "completed", what="owner A's post")
    return session_id


ROUTES = {
    "get": ("GET", "/api/sessions/{id}", None),
    "draft": ("GET", "/api/sessions/{id}/draft", None),
    "feedback": ("POST", "/api/sessions/{id}/feedback", {"feedback": "B was here"}),
    "cancel": ("POST", "/api/sessions/{id}/cancel", None),
    "delete": ("DELETE", "/api/sessions/{id}", None),
}


@pytest.mark.parametrize("identity", [as_principal_id("owner-b"), as_principal_claims("owner-b")], ids=["id-header", "oid-claim"])
@pytest.mark.parametrize("route", ROUTES.values(), ids=ROUTES.keys())
def test_another_owners_session_is_not_found(host: HostProcess, a_session: str, route: tuple, identity: dict) -> None:
    method, path, body = route
    with host.client() as client:
        response = client.request(method, path.format(id=a_session), json=body, headers=identity)
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        # ... and it did nothing: A's session is still there, completed, with no feedback applied.
        view = client.get(f"/api/sessions/{a_session}", headers=as_principal_id("owner-a"))
    assert view.status_code == 200
    assert view.json()["status"] == "completed"


def test_each_owner_lists_only_their_own(host: HostProcess, a_session: str) -> None:
    services = host.services()
    try:
        b_session = park_session(services, "owner-b", status="cancelled")
    finally:
        services.close()
    with host.client() as client:
        a_ids = [s["id"] for s in client.get("/api/sessions", headers=as_principal_id("owner-a")).json()["items"]]
        b_ids = [s["id"] for s in client.get("/api/sessions", headers=as_principal_claims("owner-b")).json()["items"]]
        anonymous_ids = [s["id"] for s in client.get("/api/sessions").json()["items"]]
    assert a_ids == [a_session]
    assert b_ids == [b_session]
    assert a_session not in anonymous_ids and b_session not in anonymous_ids


def test_user_id_principal_shape_is_an_owner(host: HostProcess, a_session: str) -> None:
    headers = {"X-MS-CLIENT-PRINCIPAL": encode_principal("owner-a")}
    with host.client() as client:
        assert client.get(f"/api/sessions/{a_session}", headers=headers).status_code == 200


@pytest.fixture(scope="module")
def strict_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    process = start_host(tmp_path_factory.mktemp("strict"), extra_env={"BLOGWRITER_ALLOW_ANONYMOUS": "false"})
    try:
        yield process
    finally:
        assert process.stop() == 0


@pytest.mark.parametrize("method,path", [
    ("GET", "/api/sessions"), ("POST", "/api/sessions"), ("GET", "/api/sessions/x"), ("GET", "/api/sessions/x/draft"),
    ("POST", "/api/sessions/x/feedback"), ("POST", "/api/sessions/x/cancel"), ("DELETE", "/api/sessions/x"),
])
def test_no_principal_is_401_when_anonymous_is_off(strict_host: HostProcess, method: str, path: str) -> None:
    with httpx.Client(base_url=strict_host.base_url) as client:
        response = client.request(method, path, json=POST if method == "POST" else None)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "WWW-Authenticate" in response.headers


def test_signed_in_caller_is_served_when_anonymous_is_off(strict_host: HostProcess) -> None:
    with httpx.Client(base_url=strict_host.base_url) as client:
        assert client.get("/api/health").status_code == 200
        created = client.post("/api/sessions", json=POST, headers=as_principal_claims("strict-owner"))
        assert created.status_code == 202, created.text
        listed = client.get("/api/sessions", headers=as_principal_claims("strict-owner")).json()["items"]
    assert [s["id"] for s in listed] == [created.json()["id"]]
    services = strict_host.services()
    try:
        assert services.store.list("local").items == []  # nothing landed on the anonymous owner
    finally:
        services.close()
