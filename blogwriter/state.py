"""The session document (DESIGN.md §2) and the request that creates it.

Field names are PascalCase because the document keeps the shape of the original app; the
ten original ``State`` fields come first, the additions after them. The ETag is never a field:
it travels beside the document (see :class:`blogwriter.store.base.Stored`).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Hard limits that keep requests sane and the document far below Cosmos' 2 MB item limit.
MAX_TOPIC_CHARS = 1_000
MAX_WORDS_LIMIT = 10_000
MAX_SOURCES = 20
MAX_SOURCE_CHARS = 2_048
MAX_FEEDBACK_CHARS = 4_000
MAX_FEEDBACK_ITEMS = 50
MAX_FINDINGS = 60
MAX_QUOTE_CHARS = 1_200


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class _Doc(BaseModel):
    # Documents come back from Cosmos with system properties (_rid, _etag, _ts...): ignore them.
    model_config = ConfigDict(extra="ignore", validate_assignment=True)


class SessionStatus(str, Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self is not SessionStatus.RUNNING


class StepName(str, Enum):
    RESEARCH = "research"
    WRITE = "write"
    REVIEW = "review"


class StepStatus(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class SourceRef(_Doc):
    """Where a finding comes from: a file path, a given URL, a page found by web search, or
    (with no sources and no web search) the model's own knowledge, which the post says plainly."""

    Kind: Literal["file", "url", "web", "model"]
    Location: str
    Title: str = ""


class Finding(_Doc):
    """One researched fact. ``Id`` is what the draft cites as ``[Id]``."""

    Id: int = Field(ge=1)
    Claim: str
    Quote: str = Field(default="", max_length=MAX_QUOTE_CHARS)
    Source: SourceRef
    Round: int = 1


class Usage(_Doc):
    """Token usage of one call, a session or a process."""

    InputTokens: int = 0
    OutputTokens: int = 0
    ReasoningTokens: int = 0
    TotalTokens: int = 0
    Calls: int = 0

    def plus(self, other: "Usage") -> "Usage":
        return Usage(
            InputTokens=self.InputTokens + other.InputTokens,
            OutputTokens=self.OutputTokens + other.OutputTokens,
            ReasoningTokens=self.ReasoningTokens + other.ReasoningTokens,
            TotalTokens=self.TotalTokens + other.TotalTokens,
            Calls=self.Calls + other.Calls,
        )


class CheckResult(_Doc):
    """A deterministic check the code (not the model) made of a draft."""

    Name: str
    Passed: bool
    Detail: str = ""


class ReviewVerdict(_Doc):
    Approved: bool
    Notes: str = ""
    ResearchRequests: list[str] = Field(default_factory=list)
    Checks: list[CheckResult] = Field(default_factory=list)


class StepRecord(_Doc):
    """The step in flight or last finished; the key to exactly-once effects (DESIGN.md §3)."""

    Name: StepName
    Seq: int = Field(ge=1)
    Status: StepStatus
    QueuedAt: datetime
    LeaseUntil: datetime | None = None
    ClaimId: str | None = None
    Attempts: int = 0
    LastError: str | None = None
    FinishedAt: datetime | None = None


class FeedbackItem(_Doc):
    Text: str
    ReceivedAt: datetime
    Applied: bool = False


class RevisionRecord(_Doc):
    """History of drafts without their text (old drafts do not accumulate in the document)."""

    Number: int
    Round: int
    Title: str
    Words: int
    CreatedAt: datetime
    Approved: bool | None = None
    Notes: str = ""


class SessionState(_Doc):
    # --- the ten fields of the original app ---
    MainTask: str
    MinWords: int
    MaxWords: int
    ResearchFindings: list[Finding] = Field(default_factory=list)
    SearchRefinements: list[str] = Field(default_factory=list)
    Draft: str = ""
    ReviewNotes: str = ""
    RevisionNumber: int = 0
    NextStep: str | None = None
    CurrentSubTask: str = ""
    # --- additions ---
    Status: SessionStatus = SessionStatus.RUNNING
    Title: str = ""
    Sources: list[str] = Field(default_factory=list)
    Step: StepRecord | None = None
    Verdict: ReviewVerdict | None = None
    ResearchRounds: int = 0
    FeedbackRound: int = 0
    MaxRevisions: int = 3
    MaxResearchRounds: int = 2
    Feedback: list[FeedbackItem] = Field(default_factory=list)
    Revisions: list[RevisionRecord] = Field(default_factory=list)
    TokenUsage: Usage = Field(default_factory=Usage)
    TokenBudget: int | None = None
    CancelRequested: bool = False
    Outcome: str | None = None
    Error: str | None = None
    CompletedAt: datetime | None = None

    @property
    def pending_feedback(self) -> list[FeedbackItem]:
        return [f for f in self.Feedback if not f.Applied]


class SessionDocument(_Doc):
    id: str
    OwnerId: str
    CreatedAt: datetime
    UpdatedAt: datetime
    RequestId: str | None = None
    State: SessionState

    def to_json_dict(self) -> dict:
        """The document as stored: JSON types only, no ETag."""
        return self.model_dump(mode="json")


# ---------------------------------------------------------------------------------------------
# Requests that cross a boundary (HTTP body, intake queue message, CLI arguments).


class PostRequest(BaseModel):
    """What a user asks for. camelCase on the wire, as HTTP and queue callers send it."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    topic: str = Field(min_length=1, max_length=MAX_TOPIC_CHARS)
    minWords: int = Field(default=600, ge=1, le=MAX_WORDS_LIMIT, strict=True)
    maxWords: int = Field(default=900, ge=1, le=MAX_WORDS_LIMIT, strict=True)
    sources: list[str] = Field(default_factory=list, max_length=MAX_SOURCES)
    tokenBudget: int | None = Field(default=None, ge=1, strict=True)

    @field_validator("sources")
    @classmethod
    def _sources_are_sane(cls, sources: list[str]) -> list[str]:
        for s in sources:
            if not s.strip():
                raise ValueError("a source must not be empty")
            if len(s) > MAX_SOURCE_CHARS:
                raise ValueError(f"a source must be at most {MAX_SOURCE_CHARS} characters")
        return [s.strip() for s in sources]

    @model_validator(mode="after")
    def _range_is_ordered(self) -> "PostRequest":
        if self.minWords > self.maxWords:
            raise ValueError("minWords must not be greater than maxWords")
        return self


class IntakeRequest(PostRequest):
    """A request another system drops on the ``blog-requests`` queue; idempotent on requestId."""

    requestId: str = Field(min_length=1, max_length=200)
    ownerId: str = Field(default="intake", min_length=1, max_length=200)


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    feedback: str = Field(min_length=1, max_length=MAX_FEEDBACK_CHARS)


def new_session(
    request: PostRequest,
    owner_id: str,
    *,
    now: datetime,
    session_id: str | None = None,
    request_id: str | None = None,
    max_revisions: int = 3,
    max_research_rounds: int = 2,
    default_token_budget: int | None = None,
) -> SessionDocument:
    state = SessionState(
        MainTask=request.topic,
        MinWords=request.minWords,
        MaxWords=request.maxWords,
        Sources=list(request.sources),
        MaxRevisions=max_revisions,
        MaxResearchRounds=max_research_rounds,
        TokenBudget=request.tokenBudget if request.tokenBudget is not None else default_token_budget,
        CurrentSubTask="Waiting for the first step",
    )
    return SessionDocument(
        id=session_id or str(uuid.uuid4()),
        OwnerId=owner_id,
        CreatedAt=now,
        UpdatedAt=now,
        RequestId=request_id,
        State=state,
    )


def intake_session_id(owner_id: str, request_id: str) -> str:
    """Deterministic session id for an intake request: the same requestId twice is one session."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"blogwriter:{owner_id}:{request_id}"))
