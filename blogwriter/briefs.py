"""What the agents hand to a model and what they expect back.

A brief is the typed input an agent builds from the session state alone; the prompt text is
rendered from it. Real models read the prompt; the offline extractive writer reads the brief.
Outputs are pydantic models: the OpenAI client asks for them as structured outputs and every
model's answer is validated against them.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .state import CheckResult, Finding, SourceRef


class Passage(BaseModel):
    """A paragraph of a given source, numbered so a model can point at it."""

    number: int
    source: SourceRef
    text: str


class ResearchBrief(BaseModel):
    kind: Literal["research"] = "research"
    topic: str
    min_words: int
    max_words: int
    round: int
    requests: list[str] = Field(default_factory=list, description="what the reviewer asked to research")
    refinements: list[str] = Field(default_factory=list)
    passages: list[Passage] = Field(default_factory=list)
    known_claims: list[str] = Field(default_factory=list)
    web_search: bool = False
    max_findings: int = 20


class WriteBrief(BaseModel):
    kind: Literal["write"] = "write"
    topic: str
    min_words: int
    max_words: int
    findings: list[Finding]
    title: str = ""
    draft: str = ""
    review_notes: str = ""
    feedback: list[str] = Field(default_factory=list)
    revision: int = 0


class ReviewBrief(BaseModel):
    kind: Literal["review"] = "review"
    topic: str
    min_words: int
    max_words: int
    title: str
    draft: str
    findings: list[Finding]
    checks: list[CheckResult] = Field(default_factory=list)


Brief = Union[ResearchBrief, WriteBrief, ReviewBrief]


class _Out(BaseModel):
    # Strict JSON schema friendly: every field required, nothing extra.
    model_config = ConfigDict(extra="forbid")


class FoundFact(_Out):
    claim: str = Field(description="one concrete, self-contained fact relevant to the topic")
    quote: str = Field(description="the exact sentence(s) of the source the claim rests on")
    passage: int | None = Field(description="number of the given passage it comes from, or null for a web page")
    url: str | None = Field(description="the web page's URL when the fact comes from web search, else null")
    title: str | None = Field(description="the web page's title when the fact comes from web search, else null")


class ResearchOutput(_Out):
    findings: list[FoundFact]
    refinements: list[str] = Field(description="search refinements worth trying next")


class DraftOutput(_Out):
    title: str = Field(description="the post's title, without a leading #")
    body: str = Field(description="the post in Markdown without the title and without a references list; cite findings as [n]")


class ReviewOutput(_Out):
    approved: bool
    notes: str = Field(description="what to change, concretely; empty when approved")
    research_requests: list[str] = Field(description="facts still missing that research should find; may be empty")
