"""What users (HTTP, CLI, other systems) do with sessions: create, read, list, feedback, cancel, delete.

Creation enqueues the first step itself (DESIGN.md §1), so a new session starts without waiting
for the change feed; from then on the router moves it along.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from .decide import Action, decide
from .errors import InvalidRequest, PoisonMessage, SessionBusy, SessionExists, SessionNotFound
from .router import advance, apply_decision, enqueue_step
from .services import Services
from .state import (
    MAX_FEEDBACK_ITEMS,
    FeedbackItem,
    FeedbackRequest,
    IntakeRequest,
    PostRequest,
    SessionStatus,
    StepStatus,
    intake_session_id,
    new_session,
)
from .store.base import Page, Stored

log = logging.getLogger(__name__)


def create_session(
    services: Services,
    request: PostRequest,
    owner_id: str,
    *,
    session_id: str | None = None,
    request_id: str | None = None,
) -> Stored:
    """Validate, create the session document with its first step claimed, and enqueue that step."""
    if request.sources:
        services.sources.validate(request.sources)
    elif services.models.researcher.needs_sources:
        raise InvalidRequest(
            "no sources given and no model configured: give sources, or configure a model (see the README)",
            field="sources",
        )
    settings = services.settings
    now = services.clock()
    doc = new_session(
        request,
        owner_id,
        now=now,
        session_id=session_id,
        request_id=request_id,
        max_revisions=settings.max_revisions,
        max_research_rounds=settings.max_research_rounds,
        default_token_budget=settings.default_token_budget,
    )
    first = decide(doc.State)
    doc.State = apply_decision(doc.State, first, now)
    stored = services.store.create(doc)
    if first.action.step is not None:
        enqueue_step(services, stored.doc)
    log.info("session %s created for %s: %r", doc.id, owner_id, request.topic[:80])
    return stored


def intake(services: Services, body: str) -> Stored:
    """A request from the ``blog-requests`` queue. The same requestId twice is one session."""
    try:
        request = IntakeRequest.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "message"
        raise PoisonMessage(f"invalid intake request: {where}: {first['msg']}") from None
    session_id = intake_session_id(request.ownerId, request.requestId)
    try:
        return services.store.get(request.ownerId, session_id)
    except SessionNotFound:
        pass
    post = PostRequest.model_validate(request.model_dump(exclude={"requestId", "ownerId"}))
    try:
        return create_session(services, post, request.ownerId, session_id=session_id, request_id=request.requestId)
    except SessionExists:  # a concurrent delivery of the same request won the race
        return services.store.get(request.ownerId, session_id)
    except InvalidRequest as exc:
        raise PoisonMessage(f"invalid intake request: {exc.field or 'request'}: {exc}") from None


def get_session(services: Services, owner_id: str, session_id: str) -> Stored:
    return services.store.get(owner_id, session_id)


def list_sessions(services: Services, owner_id: str, *, limit: int = 20, continuation: str | None = None) -> Page:
    return services.store.list(owner_id, limit=limit, continuation=continuation)


def add_feedback(services: Services, owner_id: str, session_id: str, request: FeedbackRequest) -> Stored:
    """Follow-up feedback: keep task, research and draft, clear the review, reset the revision
    count, and write again."""
    stored = services.store.get(owner_id, session_id)
    state = stored.doc.State
    if state.Status is SessionStatus.RUNNING:
        raise SessionBusy("the session is still running: wait for it to finish (or cancel it) before sending feedback")
    if not state.Draft:
        raise SessionBusy("the session has no draft to revise")
    if len(state.Feedback) >= MAX_FEEDBACK_ITEMS:
        raise SessionBusy(f"the session already took {MAX_FEEDBACK_ITEMS} rounds of feedback")
    now = services.clock()
    s = state.model_copy(deep=True)
    s.Feedback.append(FeedbackItem(Text=request.feedback, ReceivedAt=now))
    s.FeedbackRound += 1
    s.RevisionNumber = 0
    s.Verdict = None
    s.ReviewNotes = ""
    s.Status = SessionStatus.RUNNING
    s.CancelRequested = False
    s.Outcome = s.Error = s.CompletedAt = None
    if s.Step is not None and s.Step.Status is not StepStatus.DONE:
        # A step cancelled mid-flight: retire it, so its late result is dropped (the worker no
        # longer owns the claim) and decide() issues a fresh write for the feedback.
        s.Step.Status, s.Step.ClaimId, s.Step.LeaseUntil, s.Step.FinishedAt = StepStatus.DONE, None, None, now
    s.CurrentSubTask = "Feedback received: revising"
    saved = services.store.replace(stored.doc.model_copy(update={"State": s, "UpdatedAt": now}), stored.etag)
    if advance(services, owner_id, session_id, stored=saved).action is not Action.WAIT:
        return services.store.get(owner_id, session_id)
    return saved


def cancel(services: Services, owner_id: str, session_id: str) -> Stored:
    """Stop a running session: no further step starts and no further model call is made."""
    stored = services.store.get(owner_id, session_id)
    state = stored.doc.State
    if state.Status is SessionStatus.CANCELLED:
        return stored
    if state.Status.terminal:
        raise SessionBusy(f"the session is already {state.Status.value}")
    now = services.clock()
    s = state.model_copy(deep=True)
    s.Status = SessionStatus.CANCELLED
    s.CancelRequested = True
    s.NextStep = None
    s.CompletedAt = now
    s.CurrentSubTask = "Cancelled by the user"
    return services.store.replace(stored.doc.model_copy(update={"State": s, "UpdatedAt": now}), stored.etag)


def delete_session(services: Services, owner_id: str, session_id: str) -> None:
    services.store.delete(owner_id, session_id)
