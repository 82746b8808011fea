"""The one module that reads the environment. Everything else receives a :class:`Settings`.

Names follow the Azure Functions habit: upper case with a service prefix, identity-based
connections with ``__`` suffixes (``COSMOS_CONNECTION__accountEndpoint``). Every name here is
listed in ``local.settings.example.json`` and in the README's settings table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Mapping

from .errors import ConfigurationError

# Queue names are part of the app's contract with other systems (and of function_app.py).
INTAKE_QUEUE = "blog-requests"
RESEARCH_QUEUE = "research-tasks"
WRITE_QUEUE = "write-tasks"
REVIEW_QUEUE = "review-tasks"
TASK_QUEUES = (RESEARCH_QUEUE, WRITE_QUEUE, REVIEW_QUEUE)


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in {"1", "true", "yes", "on"}:
        return True
    if v in {"0", "false", "no", "off"}:
        return False
    raise ConfigurationError(f"expected true/false, got {value!r}")


def _int(
    env: Mapping[str, str], name: str, default: int | None, *, minimum: int = 0, maximum: int | None = None
) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(f"{name} must be at most {maximum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = (env.get(name) or default).strip().lower()
    if value not in choices:
        raise ConfigurationError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


@dataclass(frozen=True)
class ModelSettings:
    """Which model answers, chosen by settings alone (issue: real models)."""

    model: str | None = None
    research_model: str | None = None
    write_model: str | None = None
    review_model: str | None = None
    api: Literal["responses", "chat"] = "responses"
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    azure_endpoint: str | None = None
    azure_deployment: str | None = None
    azure_api_key: str | None = None
    azure_api_version: str = "2025-04-01-preview"
    web_search: Literal["auto", "on", "off"] = "auto"
    timeout_seconds: float = 120.0
    max_retries: int = 4
    max_output_tokens: int = 4_000
    offline: bool = False

    @property
    def configured(self) -> bool:
        """True when a real model is configured (otherwise the offline extractive writer runs)."""
        if self.offline:
            return False
        return bool(self.openai_api_key or self.openai_base_url or self.azure_endpoint)

    def model_for(self, agent: str) -> str | None:
        specific = {"researcher": self.research_model, "author": self.write_model, "reviewer": self.review_model}
        return specific.get(agent) or self.model or self.azure_deployment


@dataclass(frozen=True)
class Settings:
    home: Path
    backend: Literal["embedded", "azure"] = "embedded"
    owner: str = "local"
    allow_anonymous: bool = False
    allow_local_files: bool = False
    source_roots: tuple[Path, ...] = ()
    # Refuse URLs that resolve to loopback, private or link-local addresses (a deployed server
    # must not be made to fetch its own network); off for the user's own machine.
    block_private_hosts: bool = True
    max_revisions: int = 3
    max_research_rounds: int = 2
    lease_seconds: int = 600  # = host.json functionTimeout: a step still running is never re-queued
    default_token_budget: int | None = 200_000
    process_token_cap: int | None = None
    fetch_timeout_seconds: float = 15.0
    fetch_max_bytes: int = 2_000_000
    cosmos_connection: str | None = None
    cosmos_endpoint: str | None = None
    cosmos_database: str = "blogwriter"
    cosmos_container: str = "sessions"
    cosmos_lease_container: str = "leases"
    # "incremental": the SDK's change feed with a continuation (a real account);
    # "poll": poll on _ts and skip (id, _etag) pairs already seen (servers whose feed is a snapshot);
    # "auto": incremental, unless the endpoint is a loopback address.
    cosmos_change_feed: Literal["auto", "incremental", "poll"] = "auto"
    storage_connection: str | None = None
    storage_queue_uri: str | None = None
    queue_encoding: Literal["none", "base64"] = "none"
    models: ModelSettings = field(default_factory=ModelSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, local: bool = False) -> "Settings":
        """Read the settings. ``local=True`` gives the defaults of the CLI and the local host,
        which serve the user's own machine: local file sources and anonymous use allowed."""
        env = os.environ if environ is None else environ
        home = Path(env.get("BLOGWRITER_HOME") or Path.home() / ".blogwriter").expanduser()
        backend = (env.get("BLOGWRITER_BACKEND") or "embedded").strip().lower()
        if backend not in ("embedded", "azure"):
            raise ConfigurationError(f"BLOGWRITER_BACKEND must be 'embedded' or 'azure', got {backend!r}")
        api = (env.get("BLOGWRITER_MODEL_API") or "responses").strip().lower()
        if api not in ("responses", "chat"):
            raise ConfigurationError(f"BLOGWRITER_MODEL_API must be 'responses' or 'chat', got {api!r}")
        web = (env.get("BLOGWRITER_WEB_SEARCH") or "auto").strip().lower()
        if web not in ("auto", "on", "off"):
            raise ConfigurationError(f"BLOGWRITER_WEB_SEARCH must be auto, on or off, got {web!r}")
        encoding = (env.get("BLOGWRITER_QUEUE_ENCODING") or "none").strip().lower()
        if encoding not in ("none", "base64"):
            raise ConfigurationError(f"BLOGWRITER_QUEUE_ENCODING must be none or base64, got {encoding!r}")
        roots = tuple(
            Path(p).expanduser().resolve() for p in (env.get("BLOGWRITER_SOURCE_ROOTS") or "").split(os.pathsep) if p
        )
        models = ModelSettings(
            model=env.get("BLOGWRITER_MODEL") or None,
            research_model=env.get("BLOGWRITER_RESEARCH_MODEL") or None,
            write_model=env.get("BLOGWRITER_WRITE_MODEL") or None,
            review_model=env.get("BLOGWRITER_REVIEW_MODEL") or None,
            api=api,  # type: ignore[arg-type]
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            azure_endpoint=env.get("AZURE_OPENAI_ENDPOINT") or None,
            azure_deployment=env.get("AZURE_OPENAI_DEPLOYMENT") or None,
            azure_api_key=env.get("AZURE_OPENAI_API_KEY") or None,
            azure_api_version=env.get("AZURE_OPENAI_API_VERSION") or ModelSettings.azure_api_version,
            web_search=web,  # type: ignore[arg-type]
            timeout_seconds=_float(env, "BLOGWRITER_MODEL_TIMEOUT", 120.0),
            max_retries=_int(env, "BLOGWRITER_MODEL_MAX_RETRIES", 4) or 0,
            max_output_tokens=_int(env, "BLOGWRITER_MAX_OUTPUT_TOKENS", 4_000, minimum=1) or 4_000,
            offline=_flag(env.get("BLOGWRITER_OFFLINE"), False),
        )
        return cls(
            home=home,
            backend=backend,  # type: ignore[arg-type]
            owner=env.get("BLOGWRITER_OWNER") or "local",
            allow_anonymous=_flag(env.get("BLOGWRITER_ALLOW_ANONYMOUS"), local),
            allow_local_files=_flag(env.get("BLOGWRITER_ALLOW_LOCAL_FILES"), local),
            source_roots=roots,
            block_private_hosts=_flag(env.get("BLOGWRITER_BLOCK_PRIVATE_HOSTS"), not local),
            max_revisions=_int(env, "BLOGWRITER_MAX_REVISIONS", 3, maximum=50) or 0,
            max_research_rounds=_int(env, "BLOGWRITER_MAX_RESEARCH_ROUNDS", 2, minimum=1, maximum=10) or 1,
            lease_seconds=_int(env, "BLOGWRITER_LEASE_SECONDS", 600, minimum=1) or 600,
            default_token_budget=_int(env, "BLOGWRITER_TOKEN_BUDGET", 200_000, minimum=1),
            process_token_cap=_int(env, "BLOGWRITER_PROCESS_TOKEN_CAP", None, minimum=1),
            fetch_timeout_seconds=_float(env, "BLOGWRITER_FETCH_TIMEOUT", 15.0),
            fetch_max_bytes=_int(env, "BLOGWRITER_FETCH_MAX_BYTES", 2_000_000, minimum=1) or 2_000_000,
            cosmos_connection=env.get("COSMOS_CONNECTION") or None,
            cosmos_endpoint=env.get("COSMOS_CONNECTION__accountEndpoint") or None,
            cosmos_database=env.get("COSMOS_DATABASE") or "blogwriter",
            cosmos_container=env.get("COSMOS_CONTAINER") or "sessions",
            cosmos_lease_container=env.get("COSMOS_LEASE_CONTAINER") or "leases",
            cosmos_change_feed=_choice(env, "COSMOS_CHANGE_FEED", ("auto", "incremental", "poll"), "auto"),  # type: ignore[arg-type]
            storage_connection=env.get("AzureWebJobsStorage") or None,
            storage_queue_uri=env.get("AzureWebJobsStorage__queueServiceUri") or None,
            queue_encoding=encoding,  # type: ignore[arg-type]
            models=models,
        )

    def with_overrides(self, **changes: object) -> "Settings":
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def db_path(self) -> Path:
        """The embedded backends' SQLite file (sessions and queues share it)."""
        return self.home / "blogwriter.sqlite3"
