"""A local OpenAI-compatible HTTP server for tests: the real SDK talks to it over real HTTP.

It serves ``POST .../responses`` (Responses API) and ``POST .../chat/completions`` (Chat
Completions, Azure's ``/openai/deployments/{name}/chat/completions`` included) in the wire format
the SDK parses, answering from a script::

    with FakeOpenAIServer() as srv:
        srv.script('{"approved": true, "notes": "", "research_requests": []}',
                   Reply(status=429),                       # the SDK retries this one
                   Reply(text=lambda req: "...", usage=TokenCounts(10, 5, 2)))
        client = openai.OpenAI(base_url=srv.base_url, api_key="test")
        ...
        srv.requests[0].body["model"]

A call with nothing left in the script is an unexpected call: it is answered with HTTP 400
(marked not retryable), recorded in ``srv.unexpected`` and raised as an ``AssertionError`` when
the ``with`` block ends; so are scripted answers nobody asked for. With ``fill_schema=True`` an
empty script is not an error: the server answers any ``json_schema`` request with a valid
instance generated from the schema (see :func:`instance_of`).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class TokenCounts:
    input: int = 100
    output: int = 50
    reasoning: int = 0


@dataclass(frozen=True)
class Citation:
    """A ``url_citation`` annotation over the first occurrence of ``anchor`` in the answer."""

    url: str
    title: str
    anchor: str


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def api(self) -> str:
        return "chat" if self.path.endswith("/chat/completions") else "responses"

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The JSON schema the request asked the answer to follow, whichever API it used."""
        return _requested_format(self.body).get("schema")


Text = Union[str, dict, Callable[[RecordedRequest], Union[str, dict]]]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a text (JSON string, dict, or callable of the request) or an error status.

    ``usage=None`` leaves usage out of the answer entirely; ``incomplete`` marks a Responses answer
    as cut short for that reason (chat: ``finish_reason="length"``).
    """

    text: Text | None = None
    status: int = 200
    usage: TokenCounts | None = field(default_factory=TokenCounts)
    citations: tuple[Citation, ...] = ()
    incomplete: str | None = None
    error_message: str = "scripted error"
    headers: tuple[tuple[str, str], ...] = ()


class FakeOpenAIServer:
    """See the module docstring. Thread-safe; one server per test."""

    def __init__(self, *, fill_schema: bool = False, default_usage: TokenCounts = TokenCounts()) -> None:
        self.fill_schema = fill_schema
        self.default_usage = default_usage
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[str] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> "FakeOpenAIServer":
        handler = type("_Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()
        if exc_type is None:
            self.assert_done()

    def assert_done(self) -> None:
        """Fail on unexpected calls and on scripted answers nobody asked for."""
        if self.unexpected:
            raise AssertionError("unexpected calls to the fake OpenAI server: " + "; ".join(self.unexpected))
        if self._script:
            raise AssertionError(f"{len(self._script)} scripted answer(s) were never requested")

    # -- addresses ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def endpoint(self) -> str:
        """The server root, e.g. for ``AZURE_OPENAI_ENDPOINT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What ``OPENAI_BASE_URL`` should be."""
        return f"{self.endpoint}/v1"

    # -- script ---------------------------------------------------------------------------------

    def script(self, *answers: Text | Reply) -> "FakeOpenAIServer":
        """Queue answers, in order; plain strings, dicts and callables become ``Reply(text=...)``."""
        with self._lock:
            for a in answers:
                self._script.append(a if isinstance(a, Reply) else Reply(text=a, usage=self.default_usage))
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    def _next(self, request: RecordedRequest) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.popleft()
        if self.fill_schema and request.json_schema is not None:
            return Reply(text=lambda r: instance_of(r.json_schema or {}), usage=self.default_usage)
        with self._lock:
            self.unexpected.append(f"{request.method} {request.path} (model {request.body.get('model')!r})")
        return None

    # -- wire format ------------------------------------------------------------------------------

    def _body(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        text = reply.text(request) if callable(reply.text) else reply.text
        if text is None:
            text = ""
        if isinstance(text, dict):
            text = json.dumps(text)
        n = next(self._ids)
        model = request.body.get("model", "fake-model")
        u = reply.usage
        if request.api == "chat":
            return {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": model,
                "choices": [{
                    "index": 0,
                    "finish_reason": "length" if reply.incomplete else "stop",
                    "message": {"role": "assistant", "content": text, "refusal": None},
                }],
                **({"usage": {
                    "prompt_tokens": u.input,
                    "completion_tokens": u.output,
                    "total_tokens": u.input + u.output,
                    "completion_tokens_details": {"reasoning_tokens": u.reasoning},
                }} if u is not None else {}),
            }
        annotations = []
        for c in reply.citations:
            at = text.find(c.anchor)
            if at < 0:
                raise AssertionError(f"citation anchor {c.anchor!r} is not in the answer")
            annotations.append({"type": "url_citation", "url": c.url, "title": c.title,
                                "start_index": at, "end_index": at + len(c.anchor)})
        output: list[dict[str, Any]] = []
        if any(t.get("type") == "web_search" for t in request.body.get("tools") or []):
            output.append({"type": "web_search_call", "id": f"ws_{n}", "status": "completed",
                           "action": {"type": "search", "query": "fake"}})
        output.append({
            "type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": annotations}],
        })
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1_700_000_000,
            "model": model,
            "status": "incomplete" if reply.incomplete else "completed",
            "incomplete_details": {"reason": reply.incomplete} if reply.incomplete else None,
            "error": None,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": request.body.get("tools") or [],
            "store": request.body.get("store"),
            "usage": {
                "input_tokens": u.input,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": u.output,
                "output_tokens_details": {"reasoning_tokens": u.reasoning},
                "total_tokens": u.input + u.output,
            } if u is not None else None,
        }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._unexpected("GET")

    def _unexpected(self, method: str) -> None:
        self.fake.unexpected.append(f"{method} {self.path}")
        self._send(404, {"error": {"message": f"fake server: no route for {method} {self.path}"}},
                   (("x-should-retry", "false"),))

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not (url.path.endswith("/responses") or url.path.endswith("/chat/completions")):
            self._unexpected("POST")
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode(errors="replace")}
        request = RecordedRequest(
            method="POST",
            path=url.path,
            query={k: v[0] for k, v in parse_qs(url.query).items()},
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        reply = self.fake._next(request)
        if reply is None:
            self._send(400, {"error": {"message": "fake server: unexpected call (script is empty)",
                                       "type": "invalid_request_error"}}, (("x-should-retry", "false"),))
            return
        if reply.status != 200:
            # A tiny Retry-After keeps the SDK's backoff out of the test's run time.
            self._send(reply.status, {"error": {"message": reply.error_message, "type": "fake_error",
                                                "code": str(reply.status)}},
                       (("retry-after-ms", "1"), *reply.headers))
            return
        try:
            payload = self.fake._body(request, reply)
        except Exception as exc:  # a broken script must show up in the test, not hang it
            self.fake.unexpected.append(f"script error: {exc!r}")
            self._send(400, {"error": {"message": f"fake server: {exc}"}}, (("x-should-retry", "false"),))
            return
        self._send(200, payload, reply.headers)


def _requested_format(body: dict[str, Any]) -> dict[str, Any]:
    text = body.get("text")
    if isinstance(text, dict) and isinstance(text.get("format"), dict):
        return text["format"]
    rf = body.get("response_format")
    if isinstance(rf, dict) and isinstance(rf.get("json_schema"), dict):
        return rf["json_schema"]
    return {}


# ---------------------------------------------------------------------------------------------
# Schema filling


def instance_of(schema: dict[str, Any], *, root: dict[str, Any] | None = None, name: str = "value") -> Any:
    """A value valid against ``schema`` (the JSON Schema subset strict structured outputs use).

    Strings are ``"<name> example"``, numbers 1, booleans true, arrays hold one item (or
    ``minItems``), nullable values take their non-null branch.
    """
    root = root if root is not None else schema
    if "$ref" in schema:
        ref = schema["$ref"]
        target: Any = root
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        return instance_of(target, root=root, name=name)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return instance_of(options[0], root=root, name=name)
    if "allOf" in schema:
        return instance_of(schema["allOf"][0], root=root, name=name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {k: instance_of(v, root=root, name=k) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        return [instance_of(schema.get("items") or {}, root=root, name=name) for _ in range(count)]
    if kind == "string":
        return f"{name} example"
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return f"{name} example"
