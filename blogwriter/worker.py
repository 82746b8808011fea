"""Queue workers: run exactly one agent step per task message (DESIGN.md §3).

A worker claims the step (Queued → Running with a lease, by If-Match) before doing anything,
drops a message whose sequence is not current or whose step is done or held under a live lease,
and writes the result back only while it still owns the claim. Duplicate deliveries therefore
never run a step's effect twice, and concurrent writers never overwrite each other.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from . import agents
from .errors import PoisonMessage, SessionConflict, SessionNotFound, TokenBudgetExceeded
from .services import Services
from .state import SessionStatus, SessionState, StepStatus, Usage
from .store.base import Stored
from .tasks import QUEUE_FOR_STEP, TaskMessage, session_ref

log = logging.getLogger(__name__)

MAX_CONFLICT_RETRIES = 8


def _load(services: Services, task: TaskMessage) -> Stored:
    try:
        return services.store.get(task.ownerId, task.sessionId)
    except SessionNotFound:
        raise PoisonMessage(f"unknown session {task.sessionId} for owner {task.ownerId}") from None


def _save(services: Services, stored: Stored, state: SessionState, now: datetime) -> Stored:
    doc = stored.doc.model_copy(update={"State": state, "UpdatedAt": now})
    return services.store.replace(doc, stored.etag)


def stale_reason(state: SessionState, task: TaskMessage, now: datetime) -> str | None:
    """Why a task message must be dropped, or None when the step may be claimed."""
    if state.Status.terminal:
        return f"session is {state.Status.value}"
    if state.CancelRequested:
        return "session is being cancelled"
    step = state.Step
    if step is None or step.Seq != task.seq:
        return f"stale sequence {task.seq} (current {step.Seq if step else 'none'})"
    if step.Name is not task.step:
        return f"step {task.step.value} does not match the current step {step.Name.value}"
    if step.Status is StepStatus.DONE:
        return f"{step.Name.value} #{step.Seq} is already done"
    if step.Status is StepStatus.RUNNING and step.LeaseUntil is not None and step.LeaseUntil > now:
        return f"{step.Name.value} #{step.Seq} is running under a live lease"
    return None


def run_task(services: Services, queue_name: str, body: str, *, dequeue_count: int = 1) -> str:
    """Handle one task message. Returns what happened, for the log.

    Raises :class:`PoisonMessage` for a message that can never succeed; any other exception
    leaves the message to be delivered again (and, past the host's limit, poisoned).
    """
    task = TaskMessage.parse(body)
    if QUEUE_FOR_STEP[task.step] != queue_name:
        raise PoisonMessage(f"a {task.step.value} task does not belong on {queue_name}")

    # 1. Claim the step.
    stored = _load(services, task)
    claim_id = uuid.uuid4().hex
    for _ in range(MAX_CONFLICT_RETRIES):
        now = services.clock()
        reason = stale_reason(stored.doc.State, task, now)
        if reason:
            log.info("dropped %s task for %s: %s", task.step.value, task.sessionId, reason)
            return f"dropped: {reason}"
        state = stored.doc.State.model_copy(deep=True)
        assert state.Step is not None
        state.Step.Status = StepStatus.RUNNING
        state.Step.LeaseUntil = now + timedelta(seconds=services.settings.lease_seconds)
        state.Step.ClaimId = claim_id
        state.Step.Attempts += 1
        state.NextStep = task.step.value
        state.CurrentSubTask = f"{task.step.value.capitalize()} #{task.seq} running (delivery {dequeue_count})"
        try:
            stored = _save(services, stored, state, now)
            break
        except SessionConflict:
            stored = _load(services, task)
    else:
        raise SessionConflict(f"could not claim {task.step.value} #{task.seq} for {task.sessionId}")

    # 2. Run the agent on the claimed state (no document I/O here).
    try:
        result = agents.AGENTS[task.step.value](services, stored.doc.State)
    except TokenBudgetExceeded as exc:
        _finish(services, task, claim_id, lambda s: _fail(s, str(exc)), usage=None)
        return f"failed: {exc}"
    except Exception as exc:
        # Hand the step back (Queued) so the redelivered message can claim it again, and record
        # why: if this keeps failing, the poison handler puts this reason on the session.
        reason = f"{type(exc).__name__}: {exc}"[:1_000]
        spent = getattr(exc, "usage", None)  # tokens a failed call still cost (e.g. invalid answers)
        spent = spent if isinstance(spent, Usage) else None
        _finish(services, task, claim_id, lambda s: _release(s, reason, services.clock()), usage=spent)
        raise

    # 3. Write the result back while we still own the claim.
    return _finish(services, task, claim_id, lambda s: agents.apply_result(s, result, services.clock()),
                   usage=result.usage, usage_applied=True)


def _owns(state: SessionState, task: TaskMessage, claim_id: str) -> bool:
    step = state.Step
    return (
        step is not None and step.Seq == task.seq and step.ClaimId == claim_id and step.Status is StepStatus.RUNNING
    )


def _finish(services: Services, task: TaskMessage, claim_id: str, change, *, usage: Usage | None,
            usage_applied: bool = False) -> str:
    """Apply ``change`` to the freshly loaded state and mark the step done, retrying on conflict.

    ``usage`` is what the step's model calls cost; ``usage_applied`` says ``change`` adds it
    itself. A worker that lost its claim (its lease expired and another took the step over)
    drops its result but still books what it spent, so the session's tokens stay true.
    """
    stored = _load(services, task)
    for _ in range(MAX_CONFLICT_RETRIES):
        state = stored.doc.State
        now = services.clock()
        if not _owns(state, task, claim_id):
            log.warning("%s #%s for %s lost its claim; result dropped", task.step.value, task.seq, task.sessionId)
            if not usage or not usage.TotalTokens:
                return "dropped: claim lost"
            booked = state.model_copy(deep=True)
            booked.TokenUsage = booked.TokenUsage.plus(usage)
            try:
                _save(services, stored, booked, now)
                return "dropped: claim lost"
            except SessionConflict:
                stored = _load(services, task)
                continue
        new = change(state.model_copy(deep=True))
        if usage is not None and not usage_applied:
            new.TokenUsage = new.TokenUsage.plus(usage)
        assert new.Step is not None
        if new.Step.Status is StepStatus.RUNNING:  # normal completion (a release sets Queued itself)
            new.Step.Status = StepStatus.DONE
            new.Step.FinishedAt = now
            new.Step.LastError = None
        new.Step.LeaseUntil = None
        if state.CancelRequested and not new.Status.terminal:
            new.Status = SessionStatus.CANCELLED
        if new.Status.terminal and new.CompletedAt is None:
            new.CompletedAt = now
        try:
            _save(services, stored, new, now)
            return f"{task.step.value} #{task.seq}: {new.CurrentSubTask}"
        except SessionConflict:
            stored = _load(services, task)
    raise SessionConflict(f"could not save {task.step.value} #{task.seq} for {task.sessionId}")


def _release(state: SessionState, reason: str, now: datetime) -> SessionState:
    assert state.Step is not None
    state.Step.Status = StepStatus.QUEUED
    state.Step.QueuedAt = now  # the redelivery is on its way: the sweeper must not add another
    state.Step.ClaimId = None
    state.Step.LastError = reason
    state.CurrentSubTask = f"{state.Step.Name.value.capitalize()} #{state.Step.Seq} failed, will retry: {reason}"
    return state


def _fail(state: SessionState, reason: str) -> SessionState:
    state.Status = SessionStatus.FAILED
    state.Error = reason
    state.NextStep = None
    state.CurrentSubTask = f"Failed: {reason}"
    return state


def mark_failed(services: Services, owner_id: str, session_id: str, reason: str) -> bool:
    """Put a session in Failed with a reason (keeping its draft); False if already terminal."""
    for _ in range(MAX_CONFLICT_RETRIES):
        stored = services.store.get(owner_id, session_id)
        if stored.doc.State.Status.terminal:
            return False
        now = services.clock()
        state = _fail(stored.doc.State.model_copy(deep=True), reason)
        state.CompletedAt = now
        if state.Step is not None and state.Step.Status is not StepStatus.DONE:
            state.Step.Status = StepStatus.DONE
            state.Step.LeaseUntil = None
            state.Step.FinishedAt = now
        try:
            _save(services, stored, state, now)
            return True
        except SessionConflict:
            continue
    raise SessionConflict(f"could not mark {session_id} failed")


def on_poison(services: Services, queue_name: str, body: str) -> None:
    """A task message failed too often: mark its session failed with the reason; never raise."""
    ref = session_ref(body)
    if ref is None:
        log.error("poison message on %s is not a task for any session; dropped: %.200r", queue_name, body)
        return
    owner_id, session_id = ref
    try:
        stored = services.store.get(owner_id, session_id)
    except SessionNotFound:
        log.error("poison message on %s names unknown session %s; dropped", queue_name, session_id)
        return
    step = stored.doc.State.Step
    try:
        task = TaskMessage.parse(body)
    except PoisonMessage as exc:
        last = str(exc)
    else:
        if step is None or step.Seq != task.seq or step.Status is StepStatus.DONE:
            log.warning("poison %s task #%s for %s is stale or done; session left as it is",
                        task.step.value, task.seq, session_id)
            return
        last = step.LastError or "the message could not be processed"
    reason = f"{queue_name}: gave up after repeated failures: {last}"
    if mark_failed(services, owner_id, session_id, reason):
        log.error("session %s failed: %s", session_id, reason)
