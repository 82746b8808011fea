"""decide() as a table: one row per branch, readable ids."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from blogwriter.decide import Action, decide
from blogwriter.state import (
    CheckResult,
    FeedbackItem,
    Finding,
    ReviewVerdict,
    SessionState,
    SessionStatus,
    SourceRef,
    StepName,
    StepRecord,
    StepStatus,
    Usage,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
FINDING = Finding(Id=1, Claim="Queues deliver at least once.", Source=SourceRef(Kind="file", Location="a.md"))


def state(**kw) -> SessionState:
    base = dict(MainTask="t", MinWords=100, MaxWords=200, MaxRevisions=2, MaxResearchRounds=2)
    base.update(kw)
    return SessionState(**base)


def done(name: StepName, seq: int = 1) -> StepRecord:
    return StepRecord(Name=name, Seq=seq, Status=StepStatus.DONE, QueuedAt=T0)


def verdict(approved: bool, requests: list[str] | None = None) -> ReviewVerdict:
    return ReviewVerdict(Approved=approved, Notes="" if approved else "tighten the intro",
                         ResearchRequests=requests or [], Checks=[CheckResult(Name="word_range", Passed=True)])


CASES = [
    ("new-session-researches-first", state(), Action.RESEARCH),
    ("research-done-writes", state(Step=done(StepName.RESEARCH), ResearchFindings=[FINDING], ResearchRounds=1), Action.WRITE),
    ("research-found-nothing-fails", state(Step=done(StepName.RESEARCH), ResearchRounds=1), Action.FAIL),
    ("write-done-reviews", state(Step=done(StepName.WRITE, 2), ResearchFindings=[FINDING], Draft="d"), Action.REVIEW),
    ("approved-completes", state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d",
                                 Verdict=verdict(True)), Action.COMPLETE),
    ("rejected-revises", state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d",
                               Verdict=verdict(False)), Action.WRITE),
    ("reviewer-asks-research-with-rounds-left", state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING],
                                                      Draft="d", ResearchRounds=1,
                                                      Verdict=verdict(False, ["latency numbers"])), Action.RESEARCH),
    ("reviewer-asks-research-without-rounds-left-revises", state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING],
                                                                 Draft="d", ResearchRounds=2,
                                                                 Verdict=verdict(False, ["more"])), Action.WRITE),
    ("revision-bound-reached-unapproved-completes", state(Step=done(StepName.REVIEW, 9), ResearchFindings=[FINDING],
                                                          Draft="d", RevisionNumber=2, Verdict=verdict(False)),
     Action.COMPLETE),
    ("approved-at-the-bound-completes", state(Step=done(StepName.REVIEW, 9), ResearchFindings=[FINDING], Draft="d",
                                              RevisionNumber=2, Verdict=verdict(True)), Action.COMPLETE),
    ("review-without-verdict-fails", state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d"),
     Action.FAIL),
    ("follow-up-feedback-writes-again", state(Step=done(StepName.REVIEW, 4), ResearchFindings=[FINDING], Draft="d",
                                              Feedback=[FeedbackItem(Text="shorter", ReceivedAt=T0)]), Action.WRITE),
    ("budget-exhausted-fails", state(Step=done(StepName.WRITE, 2), ResearchFindings=[FINDING], Draft="d",
                                     TokenBudget=1000, TokenUsage=Usage(TotalTokens=1000)), Action.FAIL),
    ("step-queued-waits", state(Step=StepRecord(Name=StepName.WRITE, Seq=2, Status=StepStatus.QUEUED, QueuedAt=T0)),
     Action.WAIT),
    ("step-running-waits", state(Step=StepRecord(Name=StepName.REVIEW, Seq=3, Status=StepStatus.RUNNING, QueuedAt=T0)),
     Action.WAIT),
    ("cancelled-waits", state(Status=SessionStatus.CANCELLED, Step=done(StepName.WRITE, 2), Draft="d"), Action.WAIT),
    ("cancel-requested-waits", state(CancelRequested=True, Step=done(StepName.WRITE, 2), Draft="d"), Action.WAIT),
    ("failed-waits", state(Status=SessionStatus.FAILED, Step=done(StepName.RESEARCH)), Action.WAIT),
    ("completed-waits", state(Status=SessionStatus.COMPLETED, Step=done(StepName.REVIEW, 3), Verdict=verdict(True)),
     Action.WAIT),
]


@pytest.mark.parametrize("given,expected", [pytest.param(s, a, id=i) for i, s, a in CASES])
def test_decide(given: SessionState, expected: Action) -> None:
    assert decide(given).action is expected


def test_decide_is_pure_and_repeatable() -> None:
    s = state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d", Verdict=verdict(False))
    before = s.model_dump()
    assert decide(s) == decide(s)
    assert s.model_dump() == before


def test_not_approved_wording_never_counts_as_approval() -> None:
    v = ReviewVerdict(Approved=False, Notes="NOT APPROVED. Approved parts: intro.")
    s = state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d", Verdict=v)
    assert decide(s).action is Action.WRITE


GATED_CASES = [
    ("approved-with-budget-exhausted-still-completes",
     state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d", Verdict=verdict(True),
           TokenBudget=100, TokenUsage=Usage(TotalTokens=100)), Action.COMPLETE),
    ("bound-reached-with-budget-exhausted-completes",
     state(Step=done(StepName.REVIEW, 9), ResearchFindings=[FINDING], Draft="d", RevisionNumber=2,
           Verdict=verdict(False), TokenBudget=100, TokenUsage=Usage(TotalTokens=100)), Action.COMPLETE),
    ("research-request-at-the-revision-bound-completes",
     state(Step=done(StepName.REVIEW, 9), ResearchFindings=[FINDING], Draft="d", RevisionNumber=2, ResearchRounds=1,
           Verdict=verdict(False, ["more numbers"])), Action.COMPLETE),
    ("rejected-with-budget-exhausted-fails",
     state(Step=done(StepName.REVIEW, 3), ResearchFindings=[FINDING], Draft="d", Verdict=verdict(False),
           TokenBudget=100, TokenUsage=Usage(TotalTokens=150)), Action.FAIL),
]


@pytest.mark.parametrize("given,expected", [pytest.param(s, a, id=i) for i, s, a in GATED_CASES])
def test_budget_gates_only_steps_that_call_a_model(given: SessionState, expected: Action) -> None:
    assert decide(given).action is expected
