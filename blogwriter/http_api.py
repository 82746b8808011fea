"""The HTTP API, free of any web framework: parsed request in, status/headers/body out.

``function_app.py`` turns ``func.HttpRequest`` into an :class:`ApiRequest` and the
:class:`ApiResponse` back into ``func.HttpResponse``; the local host goes through the same
functions, so both answer byte for byte alike. Every refusal is RFC 9457 problem details
(``application/problem+json``) with an ``errors`` list naming the field at fault, and every
refusal happens before a handler that writes is called: nothing is stored for a bad request.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from . import sessions, views
from .errors import (
    InvalidRequest,
    SessionBusy,
    SessionConflict,
    SessionExists,
    SessionNotFound,
    SourceError,
)
from .identity import Unauthenticated, owner_from_headers
from .services import Services
from .state import FeedbackRequest, PostRequest

log = logging.getLogger("blogwriter.http")

ROUTE_PREFIX = "/api"
MAX_BODY_BYTES = 64 * 1024
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_ID_CHARS = 200
MAX_CONTINUATION_CHARS = 4_096
PROBLEM_JSON = "application/problem+json"
JSON = "application/json"
MARKDOWN = "text/markdown"

# Model-level validators have no location; name the field a user would change.
_MODEL_LEVEL_FIELD: dict[type[BaseModel], str] = {PostRequest: "minWords"}


@dataclass(frozen=True)
class ApiRequest:
    """What the API needs of an HTTP request. Header names are matched case-insensitively."""

    method: str
    url: str = ""
    route_params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", self.method.upper())
        object.__setattr__(self, "headers", {k.lower(): v for k, v in self.headers.items()})

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: bytes = b""
    mimetype: str = JSON
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


class Problem(Exception):
    """A refusal on its way out; :func:`respond` returns its response as is."""

    def __init__(self, response: ApiResponse) -> None:
        super().__init__(response.status)
        self.response = response


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    slug: str,
    errors: list[dict[str, str | None]] | None = None,
    headers: dict[str, str] | None = None,
    instance: str | None = None,
) -> ApiResponse:
    body: dict[str, Any] = {"type": f"urn:blogwriter:problem:{slug}", "title": title, "status": status, "detail": detail}
    if instance:
        body["instance"] = instance
    body["errors"] = errors or []
    return ApiResponse(status, json.dumps(body).encode("utf-8"), PROBLEM_JSON, dict(headers or {}))


def not_found(detail: str = "No such resource.") -> ApiResponse:
    return problem(404, "Not Found", detail, slug="not-found")


def method_not_allowed(method: str, allow: list[str]) -> ApiResponse:
    allowed = ", ".join(sorted(set(allow)))
    return problem(
        405, "Method Not Allowed", f"{method} is not allowed here; use {allowed}.",
        slug="method-not-allowed", headers={"Allow": allowed},
    )


def payload_too_large(limit: int = MAX_BODY_BYTES) -> ApiResponse:
    return problem(413, "Payload Too Large", f"The request body must be at most {limit} bytes.",
                   slug="payload-too-large", errors=[{"field": None, "message": f"at most {limit} bytes"}])


def _json_response(status: int, data: Any, headers: dict[str, str] | None = None) -> ApiResponse:
    return ApiResponse(status, json.dumps(data).encode("utf-8"), JSON, dict(headers or {}))


def _invalid(field_name: str | None, message: str) -> Problem:
    return Problem(problem(400, "Invalid Request", message, slug="invalid-request",
                           errors=[{"field": field_name, "message": message}]))


# ---------------------------------------------------------------------------------------------
# Parsing

M = TypeVar("M", bound=BaseModel)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("sources", 2, "x")`` -> ``sources[2].x``: the form InvalidRequest fields use too."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def parse_body(request: ApiRequest, model: type[M]) -> M:
    """Size, content type, JSON syntax and then the pydantic model, in that order."""
    if len(request.body) > MAX_BODY_BYTES:
        raise Problem(payload_too_large())
    content_type = (request.header("content-type") or "").split(";")[0].strip().lower()
    if content_type and content_type != JSON and not (content_type.startswith("application/") and content_type.endswith("+json")):
        raise Problem(problem(415, "Unsupported Media Type", f"Send {JSON}, not {content_type}.",
                              slug="unsupported-media-type", errors=[{"field": None, "message": f"expected {JSON}"}]))
    if not request.body.strip():
        raise _invalid(None, "The request body is empty; a JSON object is required.")
    try:
        data = json.loads(request.body.decode("utf-8-sig"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _invalid(None, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _invalid(None, "The request body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [
            {"field": field_path(err["loc"]) or _MODEL_LEVEL_FIELD.get(model), "message": err["msg"]}
            for err in exc.errors(include_url=False)
        ]
        detail = "; ".join(f"{e['field'] or 'body'}: {e['message']}" for e in errors)
        raise Problem(problem(400, "Invalid Request", detail, slug="invalid-request", errors=errors)) from None


def _session_id(request: ApiRequest) -> str:
    session_id = (request.route_params.get("id") or "").strip()
    if not session_id or len(session_id) > MAX_ID_CHARS:
        raise SessionNotFound(session_id)
    return session_id


def _page_size(request: ApiRequest) -> int:
    raw = request.query.get("limit")
    if raw is None or raw == "":
        return DEFAULT_PAGE_SIZE
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        raise _invalid("limit", f"limit must be an integer from 1 to {MAX_PAGE_SIZE}")
    return int(raw)


def _location(session_id: str) -> str:
    return f"{ROUTE_PREFIX}/sessions/{quote(session_id, safe='')}"


# ---------------------------------------------------------------------------------------------
# Handlers: (services, owner, request) -> response. They run after authentication.

Handler = Callable[[Services, str, ApiRequest], ApiResponse]


def create_session(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    post = parse_body(request, PostRequest)
    stored = sessions.create_session(services, post, owner)
    return _json_response(202, views.session_view(stored.doc), {"Location": _location(stored.doc.id)})


def list_sessions(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    limit = _page_size(request)
    continuation = request.query.get("continuation") or None
    if continuation is not None and len(continuation) > MAX_CONTINUATION_CHARS:
        raise _invalid("continuation", "continuation token is too long")
    try:
        page = sessions.list_sessions(services, owner, limit=limit, continuation=continuation)
    except ValueError as exc:  # the store could not read the token: the caller's input, not a bug
        if continuation is None or isinstance(exc, ValidationError):
            raise
        raise _invalid("continuation", f"invalid continuation token: {exc}") from None
    next_link = (
        f"{ROUTE_PREFIX}/sessions?limit={limit}&continuation={quote(page.continuation, safe='')}"
        if page.continuation else None
    )
    headers = {"Link": f'<{next_link}>; rel="next"'} if next_link else {}
    body = {"items": [views.session_view(d) for d in page.items], "continuation": page.continuation, "next": next_link}
    return _json_response(200, body, headers)


def get_session(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    stored = sessions.get_session(services, owner, _session_id(request))
    return _json_response(200, views.session_view(stored.doc), {"ETag": f'"{stored.etag}"'})


def get_draft(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    stored = sessions.get_session(services, owner, _session_id(request))
    markdown = views.post_markdown(stored.doc)
    return ApiResponse(200, markdown.encode("utf-8"), MARKDOWN)


def add_feedback(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    session_id = _session_id(request)
    feedback = parse_body(request, FeedbackRequest)
    stored = sessions.add_feedback(services, owner, session_id, feedback)
    return _json_response(202, views.session_view(stored.doc), {"Location": _location(stored.doc.id)})


def cancel_session(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    stored = sessions.cancel(services, owner, _session_id(request))
    return _json_response(200, views.session_view(stored.doc))


def delete_session(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    sessions.delete_session(services, owner, _session_id(request))
    return ApiResponse(204, b"", JSON)


def health(services: Services, owner: str, request: ApiRequest) -> ApiResponse:
    return _json_response(200, {"status": "ok", "backend": services.settings.backend})


# ---------------------------------------------------------------------------------------------
# The one entry point both hosts call.


def respond(
    handler: Handler,
    request: ApiRequest,
    services_factory: Callable[[], Services],
    *,
    anonymous: bool = False,
) -> ApiResponse:
    """Authenticate (unless ``anonymous``: the handler then gets ``""`` as owner), run
    ``handler`` and map every error to a status.

    ``services_factory`` is called inside the error handling so that a configuration error
    surfaces as a 500 problem, not as a crashed worker.
    """
    try:
        services = services_factory()
        owner = "" if anonymous else owner_from_headers(request.headers, services.settings)
        return handler(services, owner, request)
    except Problem as exc:
        return exc.response
    except Unauthenticated as exc:
        return problem(401, "Unauthorized", str(exc), slug="unauthenticated",
                       headers={"WWW-Authenticate": 'Bearer realm="blogwriter"'})
    except InvalidRequest as exc:
        return _invalid(exc.field, str(exc)).response
    except SourceError as exc:
        return _invalid("sources", str(exc)).response
    except SessionNotFound:
        return not_found("No session with that id.")
    except SessionBusy as exc:
        return problem(409, "Conflict", str(exc) or "The session cannot do that now.", slug="session-busy")
    except (SessionConflict, SessionExists) as exc:
        return problem(409, "Conflict", f"The session changed while handling the request; retry. ({type(exc).__name__})",
                       slug="session-conflict")
    except Exception:
        incident = str(uuid.uuid4())
        log.exception("unexpected error handling %s %s (incident %s)", request.method, request.url, incident)
        return problem(500, "Internal Server Error", "The request could not be handled; it has been logged.",
                       slug="internal", instance=f"urn:uuid:{incident}")


__all__ = [
    "ApiRequest", "ApiResponse", "Handler", "Problem", "respond", "problem",
    "not_found", "method_not_allowed", "payload_too_large", "parse_body",
    "create_session", "list_sessions", "get_session", "get_draft", "add_feedback",
    "cancel_session", "delete_session", "health",
]
