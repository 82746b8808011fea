"""One root exception for the package, with a specific subclass per failure callers handle."""

from __future__ import annotations


class BlogWriterError(Exception):
    """Root of every error BlogWriter raises on purpose."""


class ConfigurationError(BlogWriterError):
    """A setting is missing or contradicts another one."""


class InvalidRequest(BlogWriterError):
    """Input from a user or another system is not acceptable.

    ``field`` names the offending field (a JSON pointer-ish dotted path) when there is one,
    so the HTTP layer can put it in problem details and the CLI in its one-line message.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class SessionNotFound(BlogWriterError):
    """No session with that id exists for that owner (another owner's session included)."""


class SessionExists(BlogWriterError):
    """A session with that id already exists (create is not an upsert)."""


class SessionConflict(BlogWriterError):
    """The stored document changed since it was read (ETag mismatch, HTTP 412).

    Callers reload and re-decide; they never overwrite.
    """


class TokenBudgetExceeded(BlogWriterError):
    """A model call would exceed the session budget or the per-process cap."""


class SourceError(BlogWriterError):
    """A given source (file, folder or URL) cannot be read or is not allowed."""


class ModelError(BlogWriterError):
    """The model failed or answered with something that does not validate."""


class PoisonMessage(BlogWriterError):
    """A queue message that can never succeed (bad JSON, unknown session).

    Raised so the message takes the poison path with this reason, never crashing the worker.
    """


class SessionBusy(BlogWriterError):
    """The request does not fit the session's status (feedback while a step runs, cancel after completion)."""
