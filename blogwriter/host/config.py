"""``host.json`` and the app settings the local host reads, as the Functions host reads them.

Only what the local host honours is modelled; unknown keys are ignored as the real host ignores
sections for extensions it does not load. Two environment overrides exist for tests and quick
local runs (read here and nowhere else):

* ``BLOGWRITER_HOST_POLL_SECONDS`` caps the queue ``maxPollingInterval`` and the change-feed
  poll delay (seconds, may be fractional).
* ``BLOGWRITER_HOST_RETRY_SECONDS`` replaces the queue ``visibilityTimeout`` (the delay before a
  failed message is delivered again).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigurationError

POLL_OVERRIDE = "BLOGWRITER_HOST_POLL_SECONDS"
RETRY_OVERRIDE = "BLOGWRITER_HOST_RETRY_SECONDS"

_TIMESPAN = re.compile(r"^(?:(?P<d>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2}(?:\.\d+)?)$")


def timespan_seconds(value: Any, *, number_unit: float = 1.0) -> float:
    """A .NET TimeSpan (``[d.]hh:mm:ss[.fff]``) in seconds. Bare numbers are multiplied by
    ``number_unit`` (host.json takes ``maxPollingInterval`` as milliseconds when it is a number)."""
    if isinstance(value, bool):
        raise ValueError(f"not a time span: {value!r}")
    if isinstance(value, (int, float)):
        return float(value) * number_unit
    match = _TIMESPAN.match(str(value).strip())
    if not match:
        raise ValueError(f"not a time span (expected hh:mm:ss): {value!r}")
    days = int(match.group("d") or 0)
    return days * 86_400 + int(match.group("h")) * 3_600 + int(match.group("m")) * 60 + float(match.group("s"))


class QueuesConfig(BaseModel):
    """``extensions.queues``, with the Functions host's defaults."""

    model_config = ConfigDict(extra="ignore")

    messageEncoding: Literal["base64", "none"] = "base64"
    batchSize: int = Field(default=16, ge=1, le=32)
    newBatchThreshold: int | None = Field(default=None, ge=0)
    maxDequeueCount: int = Field(default=5, ge=1)
    maxPollingInterval: float = 60.0
    visibilityTimeout: float = 0.0

    @field_validator("messageEncoding", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    @field_validator("maxPollingInterval", mode="before")
    @classmethod
    def _polling(cls, v: Any) -> float:
        seconds = timespan_seconds(v, number_unit=0.001)
        if seconds < 0.1:
            raise ValueError("maxPollingInterval must be at least 100 ms")
        return seconds

    @field_validator("visibilityTimeout", mode="before")
    @classmethod
    def _visibility(cls, v: Any) -> float:
        return timespan_seconds(v)

    @property
    def threshold(self) -> int:
        """Fetch a new batch when this few messages are still running (host default: half a batch)."""
        return self.batchSize // 2 if self.newBatchThreshold is None else self.newBatchThreshold


class HttpConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    routePrefix: str = "api"


class Extensions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    queues: QueuesConfig = Field(default_factory=QueuesConfig)
    http: HttpConfig = Field(default_factory=HttpConfig)


class HostJson(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: Literal["2.0"]
    functionTimeout: float | None = None
    extensions: Extensions = Field(default_factory=Extensions)

    @field_validator("functionTimeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> float | None:
        return None if v is None else timespan_seconds(v)

    @model_validator(mode="after")
    def _timeout_positive(self) -> "HostJson":
        if self.functionTimeout is not None and self.functionTimeout <= 0:
            raise ValueError("functionTimeout must be positive")
        return self


class HostConfig(BaseModel):
    """host.json after the environment overrides: what the pollers and the server use."""

    model_config = ConfigDict(frozen=True)

    queues: QueuesConfig
    route_prefix: str
    function_timeout: float
    poll_cap: float | None = None

    @property
    def max_polling_interval(self) -> float:
        cap = self.poll_cap
        return min(self.queues.maxPollingInterval, cap) if cap else self.queues.maxPollingInterval

    def feed_poll_delay(self, trigger_ms: int | None) -> float:
        """The Cosmos trigger's ``feedPollDelay`` (ms, default 5 s), capped by the override."""
        delay = (trigger_ms if trigger_ms is not None else 5_000) / 1000
        return min(delay, self.poll_cap) if self.poll_cap else delay


def _override(env: Mapping[str, str], name: str) -> float | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise ConfigurationError(f"{name} must not be negative")
    return value


def load_host_config(path: Path, env: Mapping[str, str] | None = None) -> HostConfig:
    env = os.environ if env is None else env
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        parsed = HostJson.model_validate(raw)
    except FileNotFoundError:
        raise ConfigurationError(f"host.json not found at {path}") from None
    except (ValueError, ValidationError) as exc:
        raise ConfigurationError(f"{path} is not a valid host.json: {exc}") from None
    queues = parsed.extensions.queues
    retry = _override(env, RETRY_OVERRIDE)
    if retry is not None:
        queues = queues.model_copy(update={"visibilityTimeout": retry})
    poll = _override(env, POLL_OVERRIDE)
    return HostConfig(
        queues=queues,
        route_prefix=parsed.extensions.http.routePrefix.strip("/"),
        # The Consumption plan's default when host.json says nothing.
        function_timeout=parsed.functionTimeout or 300.0,
        poll_cap=max(poll, 0.05) if poll is not None else None,
    )


_SETTING_REF = re.compile(r"%([^%]+)%")


def resolve_setting(value: str, env: Mapping[str, str] | None = None, *, required: bool = True) -> str:
    """Expand ``%NAME%`` app-setting references in a binding value, as the Functions host does.

    A missing setting is an error when ``required`` (a queue name must be known); otherwise the
    reference is left as it is (the embedded store ignores Cosmos database names).
    """
    env = os.environ if env is None else env

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in env and env[name] != "":
            return env[name]
        if required:
            raise ConfigurationError(f"binding refers to app setting %{name}%, which is not set")
        return match.group(0)

    return _SETTING_REF.sub(sub, value)
