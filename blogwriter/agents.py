"""The three stateless agents. Each builds its brief from the session state alone, makes one
model call through the seam (budget checked before it), and returns a result; applying that
result to a state is a separate pure function, so a write-back that meets a conflict can
re-apply it to the reloaded document.
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Iterator, Union

from . import prompts
from .briefs import DraftOutput, Passage, ResearchBrief, ResearchOutput, ReviewBrief, ReviewOutput, WriteBrief
from .checks import all_passed, check_draft
from .models.base import AgentName, Model, ModelRequest, ModelResponse
from .services import Services
from .sources import to_passages
from .state import (
    MAX_FINDINGS,
    MAX_QUOTE_CHARS,
    Finding,
    ReviewVerdict,
    RevisionRecord,
    SessionState,
    SourceRef,
    Usage,
)
from .text import count_words, rank_passages
from .usage import check_session_budget

log = logging.getLogger(__name__)

MAX_PASSAGES_PER_CALL = 40
MAX_REFINEMENTS = 20
MAX_REVISION_RECORDS = 100
MAX_TITLE_CHARS = 300
MAX_ITEM_CHARS = 300  # one search refinement or research request
MAX_NOTES_CHARS = 8_000


@dataclass(frozen=True)
class ResearchResult:
    findings: list[Finding]
    refinements: list[str]
    usage: Usage
    note: str = ""


@dataclass(frozen=True)
class DraftResult:
    title: str
    body: str
    usage: Usage
    applied_feedback: int = 0


@dataclass(frozen=True)
class ReviewResult:
    verdict: ReviewVerdict
    usage: Usage


StepResult = Union[ResearchResult, DraftResult, ReviewResult]


@contextmanager
def _charged(response: ModelResponse) -> Iterator[None]:
    """A failure after a successful call still cost its tokens: attach them to the exception so
    the worker adds them to the session (the process meter has them already)."""
    try:
        yield
    except Exception as exc:
        if not isinstance(getattr(exc, "usage", None), Usage):
            exc.usage = response.usage  # type: ignore[attr-defined]
        raise


def _call(services: Services, state: SessionState, model: Model, request: ModelRequest) -> ModelResponse:
    """One model call, refused up front if it could take the session or the process over budget."""
    estimate = model.estimate_tokens(request)
    check_session_budget(state, estimate)
    services.meter.check(estimate)
    try:
        response = model.respond(request)
    except Exception as exc:
        spent = getattr(exc, "usage", None)  # a failed answer still cost tokens
        if isinstance(spent, Usage):
            services.meter.add(spent)
        raise
    services.meter.add(response.usage)
    return response


def _request(services: Services, agent: AgentName, brief, instructions: str, prompt: str, output_type, **kw) -> ModelRequest:
    return ModelRequest(
        agent=agent,
        brief=brief,
        instructions=instructions,
        prompt=prompt,
        output_type=output_type,
        max_output_tokens=services.settings.models.max_output_tokens,
        **kw,
    )


# --- Researcher --------------------------------------------------------------------------------


def research(services: Services, state: SessionState) -> ResearchResult:
    requests = list(state.Verdict.ResearchRequests) if state.Verdict else []
    passages = to_passages(services.sources.load(state.Sources)) if state.Sources else []
    query = " ".join([state.MainTask, *requests, *state.SearchRefinements[-3:]])
    known = {f.Quote for f in state.ResearchFindings} | {f.Claim for f in state.ResearchFindings}
    candidates = [p for p in rank_passages(passages, query, limit=len(passages)) if p.text not in known]
    candidates = candidates[:MAX_PASSAGES_PER_CALL]
    room = max(0, MAX_FINDINGS - len(state.ResearchFindings))
    brief = ResearchBrief(
        topic=state.MainTask,
        min_words=state.MinWords,
        max_words=state.MaxWords,
        round=state.ResearchRounds + 1,
        requests=requests,
        refinements=state.SearchRefinements,
        passages=candidates,
        known_claims=[f.Claim for f in state.ResearchFindings],
        web_search=not state.Sources or bool(requests),
        max_findings=min(20, room),
    )
    model = services.models.researcher
    response = _call(
        services, state, model,
        _request(services, "researcher", brief, prompts.RESEARCHER, prompts.research_prompt(brief),
                 ResearchOutput, web_search=brief.web_search),
    )
    with _charged(response):
        findings = _ground(response.output, candidates, state, room, response.model or model.name)
        note = f"{len(findings)} findings from {len(candidates)} passages"
        if not findings and candidates and room:
            # The model named no usable source: fall back on the best-ranked passages themselves,
            # so every finding still rests on a real source (never on an invented one).
            findings = _passages_as_findings(candidates[: min(8, room)], state)
            note = f"model findings had no usable source; kept {len(findings)} top-ranked passages"
            log.warning("research for %r: %s", state.MainTask, note)
        refinements = [r.strip()[:MAX_ITEM_CHARS] for r in response.output.refinements if r.strip()]
        return ResearchResult(findings=findings, refinements=refinements, usage=response.usage, note=note)


def _next_id(state: SessionState) -> int:
    return max((f.Id for f in state.ResearchFindings), default=0) + 1


def _ground(output: ResearchOutput, passages: list[Passage], state: SessionState, room: int,
            model_name: str) -> list[Finding]:
    """Keep findings that point at a given passage or a web page; number them after the known ones."""
    by_number = {p.number: p for p in passages}
    known = {f.Claim.strip().lower() for f in state.ResearchFindings}
    next_id, kept = _next_id(state), []
    for fact in output.findings:
        claim = fact.claim.strip()
        if not claim or claim.lower() in known or len(kept) >= room:
            continue
        passage = by_number.get(fact.passage) if fact.passage is not None else None
        if passage is not None:
            source, quote = passage.source, fact.quote.strip() or passage.text
        elif fact.url and re.match(r"https?://", fact.url):
            source = SourceRef(Kind="web", Location=fact.url[:2_048], Title=(fact.title or fact.url)[:MAX_TITLE_CHARS])
            quote = fact.quote.strip()
        elif not passages:
            # Nothing was given to ground against: the fact is the model's own knowledge, and the
            # references say exactly that instead of pretending to a source.
            source, quote = SourceRef(Kind="model", Location=model_name, Title=f"Background knowledge of {model_name} (unverified)"), ""
        else:
            continue
        kept.append(Finding(Id=next_id, Claim=claim[:MAX_QUOTE_CHARS], Quote=quote[:MAX_QUOTE_CHARS],
                            Source=source, Round=state.ResearchRounds + 1))
        known.add(claim.lower())
        next_id += 1
    return kept


def _passages_as_findings(passages: list[Passage], state: SessionState) -> list[Finding]:
    start = _next_id(state)
    return [
        Finding(Id=start + i, Claim=p.text[:MAX_QUOTE_CHARS], Quote=p.text[:MAX_QUOTE_CHARS],
                Source=p.source, Round=state.ResearchRounds + 1)
        for i, p in enumerate(passages)
    ]


# --- Author ------------------------------------------------------------------------------------


def write(services: Services, state: SessionState) -> DraftResult:
    feedback = [f.Text for f in state.pending_feedback]
    brief = WriteBrief(
        topic=state.MainTask,
        min_words=state.MinWords,
        max_words=state.MaxWords,
        findings=state.ResearchFindings,
        title=state.Title,
        draft=state.Draft,
        review_notes=state.ReviewNotes if not feedback else "",
        feedback=feedback,
        revision=state.RevisionNumber,
    )
    response = _call(
        services, state, services.models.author,
        _request(services, "author", brief, prompts.AUTHOR, prompts.write_prompt(brief), DraftOutput),
    )
    with _charged(response):
        title, body = clean_draft(response.output.title, response.output.body)
        return DraftResult(title=title, body=body, usage=response.usage, applied_feedback=len(feedback))


def clean_draft(title: str, body: str) -> tuple[str, str]:
    """Models add what the renderer owns: a leading `# Title` and a references list. Drop both."""
    stripped = title.strip().lstrip("#").strip()
    title = stripped.splitlines()[0][:MAX_TITLE_CHARS] if stripped else ""
    lines = body.strip().splitlines()
    if lines and lines[0].startswith("# "):
        title = title or lines[0][2:].strip()
        lines = lines[1:]
    text = "\n".join(lines).strip()
    text = re.split(r"\n#{1,3}\s*(?:References|Sources|Bibliography)\s*\n", "\n" + text, maxsplit=1, flags=re.I)[0]
    return title, text.strip()


# --- Reviewer ----------------------------------------------------------------------------------


def review(services: Services, state: SessionState) -> ReviewResult:
    checks = check_draft(title=state.Title, body=state.Draft, findings=state.ResearchFindings,
                         min_words=state.MinWords, max_words=state.MaxWords)
    brief = ReviewBrief(topic=state.MainTask, min_words=state.MinWords, max_words=state.MaxWords,
                        title=state.Title, draft=state.Draft, findings=state.ResearchFindings, checks=checks)
    response = _call(
        services, state, services.models.reviewer,
        _request(services, "reviewer", brief, prompts.REVIEWER, prompts.review_prompt(brief), ReviewOutput),
    )
    out = response.output
    failed = [f"{c.Name}: {c.Detail}" for c in checks if not c.Passed]
    notes = out.notes.strip()[:MAX_NOTES_CHARS]
    for line in failed:  # the code's checks always reach the notes, whatever the model said
        if line not in notes:
            notes = f"{notes}\n- {line}".strip()
    verdict = ReviewVerdict(
        Approved=bool(out.approved) and all_passed(checks),
        Notes=notes,
        ResearchRequests=[r.strip()[:MAX_ITEM_CHARS] for r in out.research_requests if r.strip()][:5],
        Checks=checks,
    )
    return ReviewResult(verdict=verdict, usage=response.usage)


AGENTS = {"research": research, "write": write, "review": review}


# --- applying a result (pure) ------------------------------------------------------------------


def apply_result(state: SessionState, result: StepResult, now: datetime) -> SessionState:
    """The state after a step's result; the caller marks the step done and saves with If-Match."""
    s = state.model_copy(deep=True)
    s.TokenUsage = s.TokenUsage.plus(result.usage)
    if isinstance(result, ResearchResult):
        s.ResearchFindings = (s.ResearchFindings + result.findings)[:MAX_FINDINGS]
        for r in result.refinements:
            if r not in s.SearchRefinements:
                s.SearchRefinements.append(r)
        s.SearchRefinements = s.SearchRefinements[-MAX_REFINEMENTS:]
        s.ResearchRounds += 1
        s.CurrentSubTask = f"Research round {s.ResearchRounds}: {result.note}"
    elif isinstance(result, DraftResult):
        # 0 for the first draft of a feedback round, then one more per revision.
        revising = any(r.Round == s.FeedbackRound for r in s.Revisions)
        s.RevisionNumber = s.RevisionNumber + 1 if revising else 0
        s.Title, s.Draft = result.title, result.body
        s.Verdict = None
        words = count_words(result.body)
        s.Revisions = (s.Revisions + [RevisionRecord(Number=len(s.Revisions) + 1, Round=s.FeedbackRound,
                                                     Title=result.title, Words=words, CreatedAt=now)])[-MAX_REVISION_RECORDS:]
        # Only the feedback the author was given: anything that arrived later stays pending.
        for f in s.pending_feedback[: result.applied_feedback]:
            f.Applied = True
        s.CurrentSubTask = f"Draft revision {s.RevisionNumber} written ({words} words)"
    else:
        s.Verdict = result.verdict
        s.ReviewNotes = result.verdict.Notes
        if s.Revisions:
            s.Revisions[-1].Approved = result.verdict.Approved
            s.Revisions[-1].Notes = result.verdict.Notes[:2_000]
        s.CurrentSubTask = "Review: approved" if result.verdict.Approved else "Review: changes requested"
    return s
