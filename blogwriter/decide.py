"""The router's brain: given a session state, what happens next.

Pure: no I/O, no clock, no randomness. The change-feed handler calls it for every change and
acts only on a decision other than WAIT, so the router's own writes (which re-enter the change
feed) end the loop: after it claims a step, the stored step is no longer finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .state import SessionState, StepName, StepStatus


class Action(str, Enum):
    WAIT = "wait"  # nothing to do: terminal, or a step is queued/running
    RESEARCH = "research"
    WRITE = "write"
    REVIEW = "review"
    COMPLETE = "complete"
    FAIL = "fail"

    @property
    def step(self) -> StepName | None:
        return {
            Action.RESEARCH: StepName.RESEARCH,
            Action.WRITE: StepName.WRITE,
            Action.REVIEW: StepName.REVIEW,
        }.get(self)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


def budget_exhausted(state: SessionState) -> bool:
    return state.TokenBudget is not None and state.TokenUsage.TotalTokens >= state.TokenBudget


def decide(state: SessionState) -> Decision:
    if state.Status.terminal:
        return Decision(Action.WAIT, f"session is {state.Status.value}")
    if state.CancelRequested:
        # The cancel handler normally sets the status itself; this covers a cancel that raced a step.
        return Decision(Action.WAIT, "cancel requested")

    step = state.Step
    if step is not None and step.Status is not StepStatus.DONE:
        return Decision(Action.WAIT, f"{step.Name.value} #{step.Seq} is {step.Status.value}")

    decision = _next(state)
    # The budget gates only what would call a model: an approved post still completes.
    if decision.action.step is not None and budget_exhausted(state):
        return Decision(
            Action.FAIL,
            f"token budget exhausted: {state.TokenUsage.TotalTokens} of {state.TokenBudget} tokens used",
        )
    return decision


def _next(state: SessionState) -> Decision:
    step = state.Step
    if step is None:
        return Decision(Action.RESEARCH, "new session: research first")

    if state.pending_feedback:
        # Follow-up feedback keeps task, research and draft, and writes again.
        return Decision(Action.WRITE, "revise for the user's feedback")

    if step.Name is StepName.RESEARCH:
        if not state.ResearchFindings:
            return Decision(Action.FAIL, "research found nothing to write from")
        return Decision(Action.WRITE, "research done: write" if not state.Draft else "new research: revise")

    if step.Name is StepName.WRITE:
        return Decision(Action.REVIEW, "every draft is reviewed")

    # The last finished step is a review.
    verdict = state.Verdict
    if verdict is None:
        return Decision(Action.FAIL, "review finished without a verdict")
    if verdict.Approved:
        return Decision(Action.COMPLETE, "approved by the reviewer")
    if state.RevisionNumber >= state.MaxRevisions:
        return Decision(
            Action.COMPLETE,
            f"revision limit ({state.MaxRevisions}) reached without approval",
        )
    if verdict.ResearchRequests and state.ResearchRounds < state.MaxResearchRounds:
        return Decision(Action.RESEARCH, "the reviewer asked for more research")
    return Decision(Action.WRITE, "revise for the review notes")
