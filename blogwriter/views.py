"""What users see of a session: a JSON view with a status, and the post as Markdown."""

from __future__ import annotations

from .errors import SessionBusy
from .render import render_post
from .state import SessionDocument
from .text import count_words


def session_view(doc: SessionDocument) -> dict:
    s = doc.State
    return {
        "id": doc.id,
        "status": s.Status.value,
        "topic": s.MainTask,
        "minWords": s.MinWords,
        "maxWords": s.MaxWords,
        "sources": s.Sources,
        "createdAt": doc.CreatedAt.isoformat(),
        "updatedAt": doc.UpdatedAt.isoformat(),
        "completedAt": s.CompletedAt.isoformat() if s.CompletedAt else None,
        "step": (
            {"name": s.Step.Name.value, "seq": s.Step.Seq, "status": s.Step.Status.value} if s.Step else None
        ),
        "currentSubTask": s.CurrentSubTask,
        "title": s.Title or None,
        "words": count_words(s.Draft) if s.Draft else 0,
        "revisionNumber": s.RevisionNumber,
        "revisions": len(s.Revisions),
        "findings": len(s.ResearchFindings),
        "approved": s.Verdict.Approved if s.Verdict else None,
        "reviewNotes": s.ReviewNotes or None,
        "outcome": s.Outcome,
        "error": s.Error,
        "tokenUsage": {
            "input": s.TokenUsage.InputTokens,
            "output": s.TokenUsage.OutputTokens,
            "reasoning": s.TokenUsage.ReasoningTokens,
            "total": s.TokenUsage.TotalTokens,
            "calls": s.TokenUsage.Calls,
            "budget": s.TokenBudget,
        },
        "links": {"self": f"/api/sessions/{doc.id}", "draft": f"/api/sessions/{doc.id}/draft"},
    }


def post_markdown(doc: SessionDocument) -> str:
    s = doc.State
    if not s.Draft:
        raise SessionBusy("the session has no draft yet")
    return render_post(s.Title, s.Draft, s.ResearchFindings)
