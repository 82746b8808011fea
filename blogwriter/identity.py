"""Who is calling: the owner id from App Service authentication ("Easy Auth") headers.

In Azure the platform authenticates the caller and forwards the principal in
``X-MS-CLIENT-PRINCIPAL-ID`` and ``X-MS-CLIENT-PRINCIPAL`` (base64 JSON). The platform strips
these headers from incoming requests, so they can be trusted *only* when App Service
authentication is enabled on the app; without it any caller could claim any owner. When no
principal is present the request is refused, unless ``settings.allow_anonymous`` is on (the
local host), in which case the caller is ``settings.owner``.

The owner id is the session partition key: another owner's session is simply not found (404),
never forbidden (403), so ids cannot be probed.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Mapping

from .errors import BlogWriterError
from .settings import Settings

PRINCIPAL_ID_HEADER = "x-ms-client-principal-id"
PRINCIPAL_HEADER = "x-ms-client-principal"
MAX_OWNER_CHARS = 200
MAX_PRINCIPAL_HEADER_CHARS = 16_384

# Claim types that carry a stable user id, best first (Entra ID object id, then generic ones).
ID_CLAIM_TYPES = (
    "http://schemas.microsoft.com/identity/claims/objectidentifier",
    "oid",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/nameidentifier",
    "nameidentifier",
    "sub",
)


class Unauthenticated(BlogWriterError):
    """The request carries no usable principal and anonymous access is off (HTTP 401)."""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup (plain dicts are not case-insensitive)."""
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _clean(owner: str | None, source: str) -> str | None:
    if owner is None:
        return None
    owner = owner.strip()
    if not owner:
        return None
    if len(owner) > MAX_OWNER_CHARS or not owner.isprintable():
        raise Unauthenticated(f"the principal id from {source} is not a valid owner id")
    return owner


def _decode_principal(raw: str) -> dict[str, Any]:
    if len(raw) > MAX_PRINCIPAL_HEADER_CHARS:
        raise Unauthenticated("the X-MS-CLIENT-PRINCIPAL header is too large")
    try:
        padded = raw.strip() + "=" * (-len(raw.strip()) % 4)
        data = json.loads(base64.b64decode(padded, validate=False).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise Unauthenticated("the X-MS-CLIENT-PRINCIPAL header is not base64-encoded JSON") from None
    if not isinstance(data, dict):
        raise Unauthenticated("the X-MS-CLIENT-PRINCIPAL header is not a JSON object")
    return data


def principal_owner(principal: Mapping[str, Any]) -> str | None:
    """The user id in a decoded principal: ``userId`` (Static Web Apps shape) or an id claim."""
    user_id = principal.get("userId")
    if isinstance(user_id, str) and user_id.strip():
        return user_id
    claims = principal.get("claims")
    if not isinstance(claims, list):
        return None
    by_type: dict[str, str] = {}
    for claim in claims:
        if isinstance(claim, dict):
            typ, val = claim.get("typ"), claim.get("val")
            if isinstance(typ, str) and isinstance(val, str) and val.strip():
                by_type.setdefault(typ.lower(), val)
    for typ in ID_CLAIM_TYPES:
        if typ in by_type:
            return by_type[typ]
    return None


def owner_from_headers(headers: Mapping[str, str], settings: Settings) -> str:
    """The caller's owner id; :class:`Unauthenticated` when there is none and anonymous is off.

    A principal header that is present but unreadable is refused even when anonymous access
    is allowed: the caller claimed an identity we cannot honour, and falling back to the
    shared anonymous owner would mix their sessions with everyone else's.
    """
    owner = _clean(_header(headers, PRINCIPAL_ID_HEADER), "X-MS-CLIENT-PRINCIPAL-ID")
    if owner:
        return owner
    raw = _header(headers, PRINCIPAL_HEADER)
    if raw is not None and raw.strip():
        owner = _clean(principal_owner(_decode_principal(raw)), "X-MS-CLIENT-PRINCIPAL")
        if owner:
            return owner
        raise Unauthenticated("the X-MS-CLIENT-PRINCIPAL header names no user id")
    if settings.allow_anonymous:
        return settings.owner
    raise Unauthenticated("sign-in required: no App Service authentication principal on the request")


def encode_principal(user_id: str, *, claims: list[dict[str, str]] | None = None) -> str:
    """Build an ``X-MS-CLIENT-PRINCIPAL`` value (for tests and local tools)."""
    payload: dict[str, Any] = {"auth_typ": "aad", "claims": claims or []}
    if user_id:
        payload["userId"] = user_id
    return base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
