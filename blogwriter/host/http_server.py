"""Serve the app's HTTP triggers with the standard library, shaped like the Functions host.

Route templates follow the host's syntax closely enough for this app: literal segments
(case-insensitive), ``{name}``, ``{name:constraint}`` (``int``, ``guid``, ``alpha`` checked; other
constraints accepted as any segment), ``{name?}`` as a last segment and ``{*name}`` catch-all.
A path that matches no template is a 404, a template that matches without the method a 405
with ``Allow`` (the real host answers 404 there; a clearer answer costs nothing here).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func

from .. import http_api
from .loader import FunctionSpec, invoke

log = logging.getLogger("blogwriter.host")

# The host refuses bigger bodies before reading them; the API's own, smaller cap answers 413 too.
MAX_REQUEST_BYTES = 1024 * 1024
ALL_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_CONSTRAINTS = {"int": r"-?\d+", "guid": r"[0-9a-fA-F]{8}-?(?:[0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}", "alpha": r"[A-Za-z]+"}
_PARAM = re.compile(r"^\{(?P<star>\*)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<constraint>[^}?]+))?(?P<opt>\?)?\}$")


@dataclass(frozen=True)
class Route:
    function: FunctionSpec
    template: str
    methods: frozenset[str]
    pattern: re.Pattern[str]
    rank: tuple[int, int]

    def match(self, path: str) -> dict[str, str] | None:
        m = self.pattern.match(path)
        if m is None:
            return None
        return {k: unquote(v) for k, v in m.groupdict().items() if v is not None}


def compile_template(template: str) -> tuple[re.Pattern[str], tuple[int, int]]:
    """Regex for a route template (without the prefix), and a rank: more literals first, catch-alls last."""
    parts: list[str] = []
    literals = catch_all = 0
    segments = [s for s in template.strip("/").split("/") if s]
    for i, segment in enumerate(segments):
        m = _PARAM.match(segment)
        if m is None:
            literals += 1
            parts.append("/" + re.escape(segment))
            continue
        name = m.group("name")
        if m.group("star"):
            catch_all = 1
            parts.append(f"(?:/(?P<{name}>.*))?")
            continue
        body = _CONSTRAINTS.get((m.group("constraint") or "").split("(")[0].lower(), r"[^/]+")
        if m.group("opt") and i == len(segments) - 1:
            parts.append(f"(?:/(?P<{name}>{body}))?")
        else:
            parts.append(f"/(?P<{name}>{body})")
    regex = "".join(parts) or "/"
    return re.compile(f"^{regex}/?$", re.IGNORECASE), (-literals, catch_all)


def build_routes(functions: list[FunctionSpec], prefix: str) -> list[Route]:
    routes = []
    for spec in functions:
        template = spec.setting("route") or spec.name
        full = f"{prefix}/{template.strip('/')}" if prefix else template
        pattern, rank = compile_template(full)
        methods = frozenset(str(m).upper() for m in (spec.setting("methods") or ALL_METHODS))
        routes.append(Route(spec, template, methods, pattern, rank))
    return sorted(routes, key=lambda r: r.rank)


def _api_response(res: http_api.ApiResponse) -> func.HttpResponse:
    return func.HttpResponse(res.body, status_code=res.status, headers=res.headers, mimetype=res.mimetype)


class FunctionsHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], routes: list[Route]) -> None:
        super().__init__(address, _Handler)
        self.routes = routes

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def select(self, method: str, path: str) -> tuple[Route, dict[str, str]] | func.HttpResponse:
        allowed: set[str] = set()
        for route in self.routes:
            params = route.match(path)
            if params is None:
                continue
            if method in route.methods:
                return route, params
            allowed |= route.methods
        if allowed:
            return _api_response(http_api.method_not_allowed(method, sorted(allowed)))
        return _api_response(http_api.not_found(f"No function serves {path}."))


class _Handler(BaseHTTPRequestHandler):
    server: FunctionsHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "BlogWriterLocalHost/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def _read_body(self) -> bytes | None:
        """The body, or None when it is too big (then the connection is closed unread)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                total += size
                if total > MAX_REQUEST_BYTES:
                    return None
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        method = self.command.upper()
        split = urlsplit(self.path)
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            return self._send(_api_response(http_api.problem(400, "Bad Request", "Malformed request body framing.", slug="bad-request")))
        if body is None:
            self.close_connection = True
            return self._send(_api_response(http_api.payload_too_large(MAX_REQUEST_BYTES)))
        selected = self.server.select(method, split.path)
        if isinstance(selected, func.HttpResponse):
            log.info("%s %s -> %d (no function)", method, split.path, selected.status_code)
            return self._send(selected)
        route, params = selected
        headers: dict[str, str] = {}
        for key, value in self.headers.items():
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        request = func.HttpRequest(
            method=method,
            url=f"{self.server.url}{self.path}",
            headers=headers,
            params=dict(parse_qsl(split.query, keep_blank_values=True)),
            route_params=params,
            body=body,
        )
        ok, result = invoke(route.function, request, detail=f"{method} {split.path}")
        if ok and isinstance(result, func.HttpResponse):
            return self._send(result)
        if ok and isinstance(result, (str, bytes)):
            return self._send(func.HttpResponse(result))
        return self._send(_api_response(http_api.problem(500, "Internal Server Error", "The function failed; see the host log.", slug="internal")))

    def _send(self, response: func.HttpResponse) -> None:
        body = response.get_body()
        status = response.status_code
        self.send_response(status)
        has_type = False
        for key, value in response.headers.items():
            has_type = has_type or key.lower() == "content-type"
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        if status in (204, 304) or self.command == "HEAD" and status < 300:
            body = b""
        else:
            if not has_type:
                self.send_header("Content-Type", f"{response.mimetype}; charset={response.charset}")
            self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch
