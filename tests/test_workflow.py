"""The event-driven workflow on the embedded backends: claims, duplicates, conflicts, budgets,
cancellation, poison, sweeper and feedback. Real SQLite store and queue; scripted or offline model."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from blogwriter import router, sessions, worker
from blogwriter.briefs import DraftOutput, FoundFact, ResearchOutput, ReviewOutput
from blogwriter.errors import PoisonMessage
from blogwriter.models.scripted import Answer, ScriptedModel
from blogwriter.pipeline import Pipeline
from blogwriter.queues.base import poison_queue_name
from blogwriter.services import ModelSet, Services
from blogwriter.settings import RESEARCH_QUEUE, WRITE_QUEUE, Settings
from blogwriter.state import FeedbackRequest, PostRequest, SessionStatus, StepStatus, Usage
from blogwriter.tasks import TaskMessage
from blogwriter.wiring import build_services

from conftest import EXAMPLE_SOURCES


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_services(settings: Settings, model=None, clock=None) -> Services:
    services = build_services(settings)
    if model is not None:
        services.models = ModelSet.single(model)
    if clock is not None:
        services.clock = clock
    return services


@pytest.fixture
def source_file(tmp_path: Path) -> Path:
    p = tmp_path / "queues.md"
    p.write_text("# Queues\n\nStorage queues deliver every message at least once.\n\n"
                 "A message that fails five times moves to a poison queue.\n", encoding="utf-8")
    return p


def research_answer(n: int = 2) -> ResearchOutput:
    return ResearchOutput(findings=[FoundFact(claim=f"Fact {i}.", quote="", passage=1, url=None, title=None)
                                    for i in range(n)], refinements=["poison queues"])


def take(services: Services, queue: str) -> list:
    return services.queue.receive(queue, max_messages=32, visibility_timeout=60)


def test_offline_pipeline_writes_a_cited_post_in_the_word_range(settings: Settings) -> None:
    from blogwriter.checks import all_passed, check_draft
    from blogwriter.views import post_markdown

    services = make_services(settings)
    stored = sessions.create_session(
        services, PostRequest(topic="How BlogWriter turns a topic into a cited blog post", minWords=600,
                              maxWords=900, sources=[str(EXAMPLE_SOURCES)]), "local")
    doc = Pipeline(services).run_until_done("local", stored.doc.id)
    s = doc.State
    assert s.Status is SessionStatus.COMPLETED, s.Error
    assert all_passed(check_draft(title=s.Title, body=s.Draft, findings=s.ResearchFindings, min_words=600, max_words=900))
    post = post_markdown(doc)
    assert post.startswith("# ") and "\n## References\n" in post
    for q in (RESEARCH_QUEUE, WRITE_QUEUE):
        assert services.queue.count(q) == 0


def test_duplicate_delivery_runs_the_step_once(settings: Settings, source_file: Path, clock: Clock) -> None:
    model = ScriptedModel([Answer(research_answer())])
    services = make_services(settings, model, clock)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)
    first = worker.run_task(services, RESEARCH_QUEUE, msg.body)
    second = worker.run_task(services, RESEARCH_QUEUE, msg.body)
    assert "dropped" not in first and second.startswith("dropped")
    doc = services.store.get("alice", stored.doc.id).doc
    assert len(model.calls) == 1
    assert len(doc.State.ResearchFindings) == 2
    assert doc.State.TokenUsage.TotalTokens == 150  # counted once


def test_concurrent_deliveries_claim_the_step_once(settings: Settings, source_file: Path) -> None:
    gate = threading.Event()

    def slow(request):
        gate.wait(5)
        return research_answer()

    model = ScriptedModel([Answer(slow)])
    services = make_services(settings, model)
    sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                  sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)
    outcomes: list[str] = []
    threads = [threading.Thread(target=lambda: outcomes.append(worker.run_task(services, RESEARCH_QUEUE, msg.body)))
               for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    gate.set()
    for t in threads:
        t.join(10)
    assert len(model.calls) == 1
    assert sum(not o.startswith("dropped") for o in outcomes) == 1


def test_message_with_a_wrong_sequence_is_dropped_without_side_effects(settings: Settings, source_file: Path) -> None:
    model = ScriptedModel([])
    services = make_services(settings, model)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    body = TaskMessage(sessionId=stored.doc.id, ownerId="alice", step="research", seq=7).to_body()
    assert worker.run_task(services, RESEARCH_QUEUE, body).startswith("dropped: stale sequence")
    assert services.store.get("alice", stored.doc.id).etag == stored.etag
    assert model.calls == []


def test_write_back_after_a_concurrent_write_keeps_both(settings: Settings, source_file: Path) -> None:
    services = make_services(settings)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")

    def meanwhile(request):
        # Another writer changes the document while the agent works (e.g. an operator tagging it).
        cur = services.store.get("alice", stored.doc.id)
        services.store.replace(cur.doc.model_copy(update={"RequestId": "tagged"}), cur.etag)
        return research_answer(1)

    services.models = ModelSet.single(ScriptedModel([Answer(meanwhile)]))
    [msg] = take(services, RESEARCH_QUEUE)
    worker.run_task(services, RESEARCH_QUEUE, msg.body)
    doc = services.store.get("alice", stored.doc.id).doc
    assert doc.RequestId == "tagged"
    assert doc.State.Step.Status is StepStatus.DONE and len(doc.State.ResearchFindings) == 1


def test_budget_smaller_than_one_call_fails_before_the_call(settings: Settings, source_file: Path) -> None:
    model = ScriptedModel([])  # any call would raise
    services = make_services(settings, model)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)], tokenBudget=10), "alice")
    doc = Pipeline(services).run_until_done("alice", stored.doc.id)
    assert doc.State.Status is SessionStatus.FAILED
    assert "token budget" in doc.State.Error
    assert model.calls == []


def test_cancelled_session_makes_no_further_model_call(settings: Settings, source_file: Path) -> None:
    model = ScriptedModel([])
    services = make_services(settings, model)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    sessions.cancel(services, "alice", stored.doc.id)
    [msg] = take(services, RESEARCH_QUEUE)
    assert worker.run_task(services, RESEARCH_QUEUE, msg.body).startswith("dropped: session is cancelled")
    assert model.calls == []
    assert services.store.get("alice", stored.doc.id).doc.State.Status is SessionStatus.CANCELLED


def test_a_step_that_keeps_failing_ends_in_poison_and_fails_the_session(settings: Settings, source_file: Path) -> None:
    model = ScriptedModel([Answer(RuntimeError("model exploded")) for _ in range(5)])
    services = make_services(settings, model)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    doc = Pipeline(services).run_until_done("alice", stored.doc.id)
    assert doc.State.Status is SessionStatus.FAILED
    assert "model exploded" in doc.State.Error and RESEARCH_QUEUE in doc.State.Error
    assert services.queue.count(poison_queue_name(RESEARCH_QUEUE)) == 0  # handled and removed
    model.assert_consumed()


def test_bad_message_is_poison_not_a_crash(settings: Settings) -> None:
    services = make_services(settings)
    with pytest.raises(PoisonMessage, match="invalid task message"):
        worker.run_task(services, RESEARCH_QUEUE, "not json")
    body = TaskMessage(sessionId="nope", ownerId="alice", step="research", seq=1).to_body()
    with pytest.raises(PoisonMessage, match="unknown session"):
        worker.run_task(services, RESEARCH_QUEUE, body)
    worker.on_poison(services, RESEARCH_QUEUE, "not json")  # logged and dropped, never raises


def test_sweeper_requeues_a_step_whose_lease_expired(settings: Settings, source_file: Path, clock: Clock) -> None:
    services = make_services(settings, ScriptedModel([Answer(research_answer())]), clock)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)
    services.queue.delete(msg)  # the message is lost (say a crash right after the claim)
    assert router.sweep(services) == 0
    clock.advance(settings.lease_seconds + 1)
    assert router.sweep(services) == 1
    [again] = take(services, RESEARCH_QUEUE)
    assert TaskMessage.parse(again.body).seq == 1
    assert "dropped" not in worker.run_task(services, RESEARCH_QUEUE, again.body)
    assert services.store.get("alice", stored.doc.id).doc.State.Step.Status is StepStatus.DONE


def test_router_own_writes_end_the_loop(settings: Settings, source_file: Path) -> None:
    services = make_services(settings, ScriptedModel([Answer(research_answer())]))
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=50, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)
    worker.run_task(services, RESEARCH_QUEUE, msg.body)
    services.queue.delete(msg)
    changes = services.store.read_changes(None).docs
    assert router.on_changes(services, changes) == 1  # research done -> write claimed
    # Feeding the same changes and the router's own write again moves nothing and enqueues nothing more.
    assert router.on_changes(services, changes + services.store.read_changes(None).docs) == 0
    assert services.queue.count(WRITE_QUEUE) == 1
    assert services.store.get("alice", stored.doc.id).doc.State.Step.Seq == 2


def test_feedback_revision_keeps_research_and_grows_the_history(settings: Settings) -> None:
    services = make_services(settings)
    stored = sessions.create_session(services, PostRequest(topic="How BlogWriter handles queues and retries",
                                                           minWords=300, maxWords=500,
                                                           sources=[str(EXAMPLE_SOURCES)]), "local")
    pipeline = Pipeline(services)
    first = pipeline.run_until_done("local", stored.doc.id)
    assert first.State.Status is SessionStatus.COMPLETED
    sessions.add_feedback(services, "local", stored.doc.id, FeedbackRequest(feedback="Say more about the poison queue."))
    second = pipeline.run_until_done("local", stored.doc.id)
    assert second.State.Status is SessionStatus.COMPLETED
    assert [f.Id for f in second.State.ResearchFindings][: len(first.State.ResearchFindings)] == \
        [f.Id for f in first.State.ResearchFindings]
    assert len(second.State.Revisions) > len(first.State.Revisions)
    assert second.State.FeedbackRound == 1 and all(f.Applied for f in second.State.Feedback)


# --- regressions found in review -------------------------------------------------------------


def draft(title: str = "Queues", body: str = "Queues deliver at least once [1].") -> DraftOutput:
    return DraftOutput(title=title, body=body)


def run_to_write(services: Services, source_file: Path, owner: str = "alice") -> str:
    """Create a session and run its research, leaving the write step queued."""
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=1, maxWords=100,
                                                           sources=[str(source_file)]), owner)
    [msg] = take(services, RESEARCH_QUEUE)
    worker.run_task(services, RESEARCH_QUEUE, msg.body)
    services.queue.delete(msg)
    router.advance(services, owner, stored.doc.id)
    return stored.doc.id


def test_feedback_sent_after_a_mid_step_cancel_reaches_the_author(settings: Settings, source_file: Path) -> None:
    services = make_services(settings)
    seen: list[list[str]] = []

    def cancel_and_send_feedback_meanwhile(request):
        seen.append(request.brief.feedback)
        if len(seen) == 1:
            sessions.cancel(services, "alice", sid)
            sessions.add_feedback(services, "alice", sid, FeedbackRequest(feedback="Add a section on poison queues."))
        return draft()

    model = ScriptedModel([Answer(research_answer())] + [Answer(cancel_and_send_feedback_meanwhile)] * 2 +
                          [Answer(ReviewOutput(approved=True, notes="", research_requests=[]))])
    services.models = ModelSet.single(model)
    sid = run_to_write(services, source_file)
    # A first draft exists before the cancel, so feedback is accepted.
    cur = services.store.get("alice", sid)
    services.store.replace(cur.doc.model_copy(update={"State": cur.doc.State.model_copy(update={"Draft": "old", "Title": "t"})}), cur.etag)
    doc = Pipeline(services).run_until_done("alice", sid)
    assert seen == [[], ["Add a section on poison queues."]]
    assert doc.State.Status is SessionStatus.COMPLETED and all(f.Applied for f in doc.State.Feedback)


def test_a_title_of_only_hashes_does_not_crash_the_author(settings: Settings, source_file: Path) -> None:
    services = make_services(settings, ScriptedModel([Answer(research_answer()), Answer(draft(title="#"))]))
    sid = run_to_write(services, source_file)
    [msg] = take(services, WRITE_QUEUE)
    assert "dropped" not in worker.run_task(services, WRITE_QUEUE, msg.body)
    assert services.store.get("alice", sid).doc.State.Draft


def test_tokens_of_a_failure_after_the_call_are_booked_on_the_session(settings: Settings, source_file: Path) -> None:
    services = make_services(settings, ScriptedModel([Answer(research_answer()),
                                                      Answer(lambda r: (_ for _ in ()).throw(ValueError("boom")))]))
    sid = run_to_write(services, source_file)
    before = services.store.get("alice", sid).doc.State.TokenUsage.TotalTokens
    # An exception raised while handling an answer (here inside the scripted answer) costs nothing;
    # one raised after a successful call carries the call's usage.
    from blogwriter import agents

    original = agents.clean_draft
    agents.clean_draft = lambda title, body: (_ for _ in ()).throw(RuntimeError("post-processing failed"))
    try:
        services.models = ModelSet.single(ScriptedModel([Answer(draft())]))
        [msg] = take(services, WRITE_QUEUE)
        with pytest.raises(RuntimeError):
            worker.run_task(services, WRITE_QUEUE, msg.body)
    finally:
        agents.clean_draft = original
    state = services.store.get("alice", sid).doc.State
    assert state.TokenUsage.TotalTokens == before + 150
    assert state.Step.Status is StepStatus.QUEUED and "post-processing failed" in state.Step.LastError


def test_a_worker_that_lost_its_claim_drops_its_result_but_books_its_tokens(
        settings: Settings, source_file: Path, clock: Clock) -> None:
    services = make_services(settings, clock=clock)
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=1, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)

    def outlive_the_lease(request):
        clock.advance(settings.lease_seconds + 1)
        router.sweep(services)  # re-queues the step: a second worker takes it over
        [again] = take(services, RESEARCH_QUEUE)
        services.models = ModelSet.single(ScriptedModel([Answer(research_answer(3))]))
        assert "dropped" not in worker.run_task(services, RESEARCH_QUEUE, again.body)
        return research_answer(1)

    services.models = ModelSet.single(ScriptedModel([Answer(outlive_the_lease)]))
    assert worker.run_task(services, RESEARCH_QUEUE, msg.body) == "dropped: claim lost"
    state = services.store.get("alice", stored.doc.id).doc.State
    assert len(state.ResearchFindings) == 3  # the second worker's result, once
    assert state.TokenUsage.TotalTokens == 300  # both calls were paid for


def test_a_failed_attempt_does_not_make_the_sweeper_add_a_duplicate(
        settings: Settings, source_file: Path, clock: Clock) -> None:
    services = make_services(settings, ScriptedModel([Answer(RuntimeError("flaky"))]), clock)
    sessions.create_session(services, PostRequest(topic="queues", minWords=1, maxWords=100,
                                                  sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)
    clock.advance(settings.lease_seconds - 5)
    with pytest.raises(RuntimeError):
        worker.run_task(services, RESEARCH_QUEUE, msg.body)
    clock.advance(10)  # past the original QueuedAt + lease, within the new one
    assert router.sweep(services) == 0


def test_poison_for_a_step_that_finished_leaves_the_session_alone(settings: Settings, source_file: Path) -> None:
    services = make_services(settings, ScriptedModel([Answer(research_answer())]))
    stored = sessions.create_session(services, PostRequest(topic="queues", minWords=1, maxWords=100,
                                                           sources=[str(source_file)]), "alice")
    [msg] = take(services, RESEARCH_QUEUE)
    worker.run_task(services, RESEARCH_QUEUE, msg.body)
    worker.on_poison(services, RESEARCH_QUEUE, msg.body)  # a duplicate that exhausted its retries
    assert services.store.get("alice", stored.doc.id).doc.State.Status is SessionStatus.RUNNING


def test_feedback_after_cancelling_a_queued_step_starts_a_write_at_once(settings: Settings, source_file: Path) -> None:
    services = make_services(settings, ScriptedModel([Answer(research_answer())]))
    sid = run_to_write(services, source_file)
    cur = services.store.get("alice", sid)
    services.store.replace(cur.doc.model_copy(update={"State": cur.doc.State.model_copy(update={"Draft": "old", "Title": "t"})}), cur.etag)
    sessions.cancel(services, "alice", sid)
    sessions.add_feedback(services, "alice", sid, FeedbackRequest(feedback="Shorter, please."))
    state = services.store.get("alice", sid).doc.State
    assert state.Step.Name.value == "write" and state.Step.Status is StepStatus.QUEUED and state.Step.Seq == 3
    bodies = [TaskMessage.parse(m.body).seq for m in take(services, WRITE_QUEUE)]
    assert sorted(bodies) == [2, 3]  # the stale one is dropped by its sequence, the new one runs
