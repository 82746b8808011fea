"""The change-feed router and the sweeper: the only places that move a session to its next step.

For every changed document the router asks :func:`blogwriter.decide.decide` what to do and
claims the next step with If-Match before enqueueing it. Its own writes come back through the
change feed, where ``decide`` answers WAIT (the stored step is no longer finished): the loop
ends by itself. A crash between "claimed" and "enqueued" is healed by :func:`sweep`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from pydantic import ValidationError

from .decide import Action, Decision, decide
from .errors import SessionConflict, SessionNotFound
from .services import Services
from .state import SessionDocument, SessionState, SessionStatus, StepRecord, StepStatus
from .store.base import Stored
from .tasks import TaskMessage

log = logging.getLogger(__name__)

MAX_CONFLICT_RETRIES = 8


def apply_decision(state: SessionState, decision: Decision, now: datetime) -> SessionState:
    """The state after acting on a decision (pure)."""
    s = state.model_copy(deep=True)
    step = decision.action.step
    if step is not None:
        seq = (s.Step.Seq if s.Step else 0) + 1
        s.Step = StepRecord(Name=step, Seq=seq, Status=StepStatus.QUEUED, QueuedAt=now)
        s.NextStep = step.value
        s.CurrentSubTask = f"{step.value.capitalize()} #{seq} queued: {decision.reason}"
    elif decision.action is Action.COMPLETE:
        s.Status = SessionStatus.COMPLETED
        s.Outcome = decision.reason
        s.NextStep = None
        s.CompletedAt = now
        s.CurrentSubTask = f"Completed: {decision.reason}"
    elif decision.action is Action.FAIL:
        s.Status = SessionStatus.FAILED
        s.Error = decision.reason
        s.NextStep = None
        s.CompletedAt = now
        s.CurrentSubTask = f"Failed: {decision.reason}"
    return s


def enqueue_step(services: Services, doc: SessionDocument) -> None:
    step = doc.State.Step
    assert step is not None
    task = TaskMessage(sessionId=doc.id, ownerId=doc.OwnerId, step=step.Name, seq=step.Seq)
    services.queue.send(task.queue, task.to_body())


def advance(services: Services, owner_id: str, session_id: str, *, stored: Stored | None = None) -> Decision:
    """Decide and act for one session; a conflict means someone else wrote: reload, decide again."""
    for _ in range(MAX_CONFLICT_RETRIES):
        if stored is None:
            try:
                stored = services.store.get(owner_id, session_id)
            except SessionNotFound:
                return Decision(Action.WAIT, "session deleted")
        decision = decide(stored.doc.State)
        if decision.action is Action.WAIT:
            return decision
        now = services.clock()
        state = apply_decision(stored.doc.State, decision, now)
        doc = stored.doc.model_copy(update={"State": state, "UpdatedAt": now})
        try:
            saved = services.store.replace(doc, stored.etag)
        except SessionConflict:
            stored = None
            continue
        except SessionNotFound:
            return Decision(Action.WAIT, "session deleted")
        if decision.action.step is not None:
            enqueue_step(services, saved.doc)
        log.info("session %s: %s (%s)", session_id, decision.action.value, decision.reason)
        return decision
    raise SessionConflict(f"router could not settle session {session_id}")


def on_changes(services: Services, docs: list[dict]) -> int:
    """Change-feed trigger body: returns how many sessions it moved on.

    One failing document does not hold up the others; the first failure is raised at the end,
    so the trigger's retry policy (or the local pipeline) replays the batch, which is harmless.
    """
    moved, failure = 0, None
    for raw in docs:
        try:
            doc = SessionDocument.model_validate(raw)
        except ValidationError as exc:
            log.error("change feed: skipping a document that is not a session (%s): %s", raw.get("id"), exc)
            continue
        etag = raw.get("_etag")
        stored = Stored(doc, etag) if isinstance(etag, str) else None
        try:
            if advance(services, doc.OwnerId, doc.id, stored=stored).action is not Action.WAIT:
                moved += 1
        except Exception as exc:
            log.exception("change feed: routing session %s failed", doc.id)
            failure = failure or exc
    if failure is not None:
        raise failure
    return moved


def sweep(services: Services, *, limit: int = 200) -> int:
    """Timer body: re-enqueue steps whose lease expired or whose message never got sent.

    Also advances a session whose finished step the router never saw (a lost change).
    Returns how many sessions it touched.
    """
    touched = 0
    lease = timedelta(seconds=services.settings.lease_seconds)
    for stored in services.store.find_by_status(SessionStatus.RUNNING, limit=limit):
        now = services.clock()
        state, step = stored.doc.State, stored.doc.State.Step
        try:
            if step is None or step.Status is StepStatus.DONE:
                if stored.doc.UpdatedAt + lease < now and advance(services, stored.doc.OwnerId, stored.doc.id).action is not Action.WAIT:
                    touched += 1
                continue
            expired = (
                step.Status is StepStatus.RUNNING and step.LeaseUntil is not None and step.LeaseUntil <= now
            ) or (step.Status is StepStatus.QUEUED and step.QueuedAt + lease <= now)
            if not expired:
                continue
            new = state.model_copy(deep=True)
            assert new.Step is not None
            new.Step.Status, new.Step.QueuedAt, new.Step.LeaseUntil, new.Step.ClaimId = StepStatus.QUEUED, now, None, None
            new.CurrentSubTask = f"{step.Name.value.capitalize()} #{step.Seq} re-queued by the sweeper"
            saved = services.store.replace(stored.doc.model_copy(update={"State": new, "UpdatedAt": now}), stored.etag)
            enqueue_step(services, saved.doc)
            log.warning("sweeper re-enqueued %s #%s for %s", step.Name.value, step.Seq, stored.doc.id)
            touched += 1
        except (SessionConflict, SessionNotFound):
            continue  # someone else moved it meanwhile: nothing to heal
    return touched
