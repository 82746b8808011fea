"""Providers: which client, base URL and credentials serve the models, chosen by settings alone.

* OpenAI: ``OPENAI_API_KEY`` (+ optional ``OPENAI_BASE_URL``), Responses API.
* Azure OpenAI: ``AZURE_OPENAI_ENDPOINT`` + ``AZURE_OPENAI_DEPLOYMENT``, with
  ``AZURE_OPENAI_API_KEY`` or, without a key, Entra ID (``DefaultAzureCredential``).
* Any OpenAI-compatible server (Ollama, vLLM, llama.cpp): ``OPENAI_BASE_URL`` with
  ``BLOGWRITER_MODEL_API=chat``; the API key may be absent.

Every client built here sends its requests through an ``httpx`` client carrying the remote-call
guard (:func:`block_remote_model_calls`), so a test suite can make sure that nothing it runs
reaches a paid API.
"""

from __future__ import annotations

import ipaddress
import threading
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

import openai

from ..errors import ConfigurationError
from ..settings import ModelSettings
from .openai import OpenAIModel

if TYPE_CHECKING:
    from ..services import ModelSet

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
AZURE_SCOPE = "https://cognitiveservices.azure.com/.default"
# Local servers ignore the key, but the SDK insists on having one.
PLACEHOLDER_API_KEY = "not-needed"
AGENTS = ("researcher", "author", "reviewer")

# ---------------------------------------------------------------------------------------------
# The remote-call guard


class RemoteModelCallBlocked(RuntimeError):
    """A model request was about to leave the machine while remote calls are blocked.

    Deliberately not a :class:`~blogwriter.errors.BlogWriterError`: no handler may swallow it
    as an ordinary model failure, so a test that would reach a real provider fails loudly.
    """


_guard = {"blocked": False}
_guard_lock = threading.Lock()
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def block_remote_model_calls(enabled: bool = True) -> None:
    """Refuse (or allow again) every model request whose host is not a loopback address.

    The switch is module-wide and checked at request time, so it also covers clients built
    before it was turned on. The test suite's conftest turns it on for the whole session.
    """
    with _guard_lock:
        _guard["blocked"] = enabled


def remote_model_calls_blocked() -> bool:
    return _guard["blocked"]


def is_loopback_host(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse_remote(request: Any) -> None:
    """httpx request event hook: runs before every request (redirects and retries included)."""
    if _guard["blocked"] and not is_loopback_host(request.url.host):
        raise RemoteModelCallBlocked(
            f"remote model calls are blocked: refused {request.method} {request.url.scheme}://{request.url.host}"
            f"{request.url.path} (only 127.0.0.1, localhost and ::1 are allowed; "
            "see blogwriter.models.providers.block_remote_model_calls)"
        )


def guarded_http_client(timeout: float) -> Any:
    """The SDK's default httpx client with the remote-call guard as a request hook."""
    return openai.DefaultHttpxClient(timeout=timeout, event_hooks={"request": [_refuse_remote]})


# ---------------------------------------------------------------------------------------------
# Clients


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _lazy_entra_token_provider() -> Callable[[], str]:
    """Entra ID bearer tokens for Azure OpenAI; azure-identity is imported on the first request.

    Building the credential lazily keeps configurations (and tests) without Azure from ever
    touching the identity stack.
    """
    provider: list[Callable[[], str]] = []
    lock = threading.Lock()

    def token() -> str:
        with lock:
            if not provider:
                from azure.identity import DefaultAzureCredential, get_bearer_token_provider

                provider.append(get_bearer_token_provider(DefaultAzureCredential(), AZURE_SCOPE))
        return provider[0]()

    return token


def _names(settings: ModelSettings, default: str | None, missing: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for agent in AGENTS:
        name = settings.model_for(agent) or default
        if not name:
            raise ConfigurationError(missing)
        names[agent] = name
    return names


def _web_search(settings: ModelSettings, *, hosted_search_available: bool) -> bool:
    if settings.web_search == "off":
        return False
    if settings.web_search == "on":
        if settings.api == "chat":
            raise ConfigurationError(
                "BLOGWRITER_WEB_SEARCH=on needs the Responses API; unset BLOGWRITER_MODEL_API=chat or the web search"
            )
        return True
    return settings.api == "responses" and hosted_search_available


def build_model_set(
    settings: ModelSettings,
    *,
    azure_token_provider: Callable[[], str] | None = None,
) -> "ModelSet":
    """One :class:`OpenAIModel` per agent, all sharing one client of the configured provider.

    ``azure_token_provider`` replaces the Entra ID token source (for tests); by default it is
    ``DefaultAzureCredential``, built on the first request.
    """
    from ..services import ModelSet  # services imports the whole app; keep this module light

    if settings.offline:
        raise ConfigurationError("BLOGWRITER_OFFLINE is set: no real model to build")
    common: dict[str, Any] = {"timeout": settings.timeout_seconds, "max_retries": settings.max_retries}
    make_client: Callable[[], openai.OpenAI]
    if settings.azure_endpoint:
        if urlsplit(settings.azure_endpoint).scheme not in ("http", "https"):
            raise ConfigurationError(f"AZURE_OPENAI_ENDPOINT must be an http(s) URL, got {settings.azure_endpoint!r}")
        names = _names(settings, None, "AZURE_OPENAI_DEPLOYMENT is required with AZURE_OPENAI_ENDPOINT")
        # No azure_deployment on the client: the SDK then routes chat calls by each request's
        # model (= deployment), so every agent may use its own deployment.
        auth: dict[str, Any] = (
            {"api_key": settings.azure_api_key}
            if settings.azure_api_key
            else {"azure_ad_token_provider": azure_token_provider or _lazy_entra_token_provider()}
        )
        endpoint, version = settings.azure_endpoint, settings.azure_api_version

        def make_client() -> openai.OpenAI:
            return openai.AzureOpenAI(
                azure_endpoint=endpoint, api_version=version, http_client=guarded_http_client(common["timeout"]),
                **auth, **common,
            )

        provider = "azure-openai"
        web = _web_search(settings, hosted_search_available=True)
        token_param = "max_completion_tokens"
    elif settings.openai_api_key or settings.openai_base_url:
        base_url = (settings.openai_base_url or OPENAI_BASE_URL).rstrip("/")
        if urlsplit(base_url).scheme not in ("http", "https"):
            raise ConfigurationError(f"OPENAI_BASE_URL must be an http(s) URL, got {base_url!r}")
        official = _host(base_url) == "api.openai.com"
        if official and not settings.openai_api_key:
            raise ConfigurationError("OPENAI_API_KEY is required for api.openai.com")
        names = _names(
            settings,
            DEFAULT_OPENAI_MODEL if official else None,
            f"BLOGWRITER_MODEL is required with OPENAI_BASE_URL={base_url}",
        )
        api_key = settings.openai_api_key or PLACEHOLDER_API_KEY

        def make_client() -> openai.OpenAI:
            return openai.OpenAI(
                api_key=api_key, base_url=base_url, http_client=guarded_http_client(common["timeout"]), **common
            )

        provider = "openai" if official else f"openai-compatible server {_host(base_url)}"
        web = _web_search(settings, hosted_search_available=official)
        # Local servers know the classic max_tokens; OpenAI's reasoning models only the new name.
        token_param = "max_completion_tokens" if official else "max_tokens"
    else:
        raise ConfigurationError("no model configured: set OPENAI_API_KEY, OPENAI_BASE_URL or AZURE_OPENAI_ENDPOINT")

    client = make_client()  # only once the settings are known to be complete: one per provider
    models = {
        agent: OpenAIModel(
            client,
            names[agent],
            api=settings.api,
            web_search=web,
            provider=provider,
            max_output_tokens=settings.max_output_tokens,
            chat_token_param=token_param,  # type: ignore[arg-type]
        )
        for agent in AGENTS
    }
    return ModelSet(researcher=models["researcher"], author=models["author"], reviewer=models["reviewer"])
