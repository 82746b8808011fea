"""The offline extractive writer: answers all three agents without any model account.

It reads the typed brief (never the prompt) and works only with the text it was given: research
picks the most topical sentences of the best-ranked passages, writing copies sentences of the
findings (each with its citation) into a post sized to the word range, and review approves
exactly when the deterministic checks passed. Nothing is invented and nothing is random, so the
same brief always gives the same answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from ..briefs import (DraftOutput, FoundFact, Passage, ResearchBrief, ResearchOutput, ReviewBrief,
                      ReviewOutput, WriteBrief)
from ..checks import check_draft
from ..errors import ModelError
from ..state import MAX_QUOTE_CHARS, CheckResult, Finding, Usage
from ..text import (STOP_WORDS, bm25_scores, clean_sentence, count_words, rank_passages, split_sentences,
                    stem, terms, words)
from .base import Model, ModelRequest, ModelResponse, T

MIN_SENTENCE_WORDS = 4
MAX_CLAIM_WORDS = 80
MAX_REFINEMENTS = 5
MAX_SECTIONS = 4
MAX_HEADING_CHARS = 70
PARAGRAPH_WORDS = 90

_SHORTER = re.compile(r"too long|shorter|shorten|fewer words|\bcut\b|\btrim\b|more concise", re.I)
_LONGER = re.compile(r"too short|longer|lengthen|expand|more words|more detail", re.I)
_QUESTION_WORDS = ("how", "why", "what", "when", "where", "which", "who")


def _norm(sentence: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", sentence.lower()))


def _sentences(text: str) -> list[str]:
    """Quotable sentences: cleaned, long enough, and not a lead-in that ends with a colon."""
    out = []
    for s in split_sentences(text):
        s = clean_sentence(s)
        if count_words(s) >= MIN_SENTENCE_WORDS and not s.endswith(":"):
            out.append(s)
    return out


def _surface_forms(texts: list[str]) -> dict[str, str]:
    """The most common spelling of each stem, case kept (``ETag``), alphabetical on ties."""
    seen: dict[str, Counter[str]] = {}
    for text in texts:
        for w in re.findall(r"[A-Za-z0-9]+", text):
            if w.lower() not in STOP_WORDS:
                seen.setdefault(stem(w), Counter())[w if w[1:] != w[1:].lower() else w.lower()] += 1
    return {s: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] for s, c in seen.items()}


def _salient(texts: list[str], exclude: set[str], *, limit: int, background: list[str] | None = None) -> list[str]:
    """The most telling content words of ``texts`` whose stems are not in ``exclude``.

    With ``background`` (the texts these are part of), words common everywhere weigh less:
    frequency times inverse document frequency over the background.
    """
    counts = Counter(t for text in texts for t in terms(text) if t not in exclude and len(t) > 3 and not t.isdigit())
    weight: dict[str, float] = {t: float(n) for t, n in counts.items()}
    if background:
        docs = [set(terms(b)) for b in background]
        for t in weight:
            df = sum(1 for d in docs if t in d)
            weight[t] *= math.log(1 + len(docs) / (1 + df))
    forms = _surface_forms(texts)
    ranked = sorted(weight.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
    return [forms.get(t, t) for t, _ in ranked[:limit]]


# --- research ----------------------------------------------------------------------------------


def _claim(sentences: list[str], query: set[str]) -> list[str]:
    """The 1-3 sentences sharing the most query terms, kept in their order in the passage."""
    scored = sorted(
        ((len(query & set(terms(s))), -i) for i, s in enumerate(sentences)), reverse=True
    )
    picked = [-scored[0][1]]
    total = count_words(sentences[picked[0]])
    for score, neg_i in scored[1:]:
        i = -neg_i
        if score == 0 or len(picked) == 3 or total + count_words(sentences[i]) > MAX_CLAIM_WORDS:
            continue
        picked.append(i)
        total += count_words(sentences[i])
    return [sentences[i] for i in sorted(picked)]


def research(brief: ResearchBrief) -> ResearchOutput:
    query = " ".join([brief.topic, *brief.requests, *brief.refinements])
    query_terms = set(terms(query))
    known = {_norm(s) for c in brief.known_claims for s in [c, *split_sentences(c)]}
    ranked = rank_passages(brief.passages, query, limit=len(brief.passages))
    facts: list[FoundFact] = []
    used: list[Passage] = []
    for passage in ranked:
        if len(facts) >= brief.max_findings:
            break
        fresh = [s for s in _sentences(passage.text) if _norm(s) not in known]
        if not fresh:
            continue  # everything this passage says is already a finding
        claim = _claim(fresh, query_terms)
        known.update(_norm(s) for s in claim)
        facts.append(FoundFact(claim=" ".join(claim), quote=passage.text[:MAX_QUOTE_CHARS],
                               passage=passage.number, url=None, title=None))
        used.append(passage)
    refinements = _salient([p.text for p in used[:5]], query_terms, limit=MAX_REFINEMENTS)
    return ResearchOutput(findings=facts, refinements=refinements)


# --- writing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """One sentence of a finding, ready to be cited."""

    finding: Finding
    position: int
    text: str

    def cited(self) -> str:
        m = re.match(r"(.*?)([.!?])([\"')\]]*)$", self.text, re.S)
        if m:
            return f"{m.group(1)}{m.group(3)} [{self.finding.Id}]{m.group(2)}"
        return f"{self.text} [{self.finding.Id}]."


def _title(brief: WriteBrief) -> str:
    if brief.title.strip() and brief.revision > 0:
        return " ".join(brief.title.split())
    title = " ".join(brief.topic.split()).rstrip(".")
    if len(title) > 120:
        title = title[:120].rsplit(" ", 1)[0]
    return title[:1].upper() + title[1:]


def _lower_first(text: str) -> str:
    """Lower-case a leading capital unless the word is a name (``BlogWriter``, ``ETag``, ``HTTP``)."""
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first[1:] == first[1:].lower() else text


def _topic_clause(topic: str) -> str:
    topic = " ".join(topic.split()).rstrip(".?!")
    first, _, rest = topic.partition(" ")
    if first.lower() in _QUESTION_WORDS and rest:
        return f"explains {first.lower()} {rest}"
    return f"is about {_lower_first(topic)}"


def _heading(text: str) -> str:
    text = clean_sentence(" ".join(text.split()))
    if len(text) > MAX_HEADING_CHARS:
        text = text[:MAX_HEADING_CHARS].rsplit(" ", 1)[0]
    return text[:1].upper() + text[1:]


def _term_heading(units: list[_Unit], topic_terms: set[str], everything: list[_Unit]) -> str:
    """A heading from the words that set these sentences apart from the rest of the post."""
    top = _salient([u.text for u in units], topic_terms, limit=3, background=[u.text for u in everything])
    return _heading(_join(top)) if top else _heading(units[0].finding.Source.Title or units[0].finding.Source.Location)


def _join(items: list[str]) -> str:
    """``a, b and c``; with semicolons when an item has its own commas or "and"."""
    if len(items) == 1:
        return items[0]
    if any("," in i or " and " in i for i in items):
        return "; ".join(items[:-1]) + "; and " + items[-1]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _sections(units: list[_Unit], groups: dict[tuple[str, str], int], topic_terms: set[str]) -> list[tuple[str, list[_Unit]]]:
    """Selected units grouped into 2-4 headed sections (fewer only when the material is one finding)."""
    by_group: dict[int, list[_Unit]] = {}
    for u in units:
        by_group.setdefault(groups[(u.finding.Source.Kind, u.finding.Source.Location)], []).append(u)
    ordered = [by_group[g] for g in sorted(by_group)]
    ordered = [sorted(us, key=lambda u: (u.finding.Id, u.position)) for us in ordered]
    if len(ordered) == 1:
        ids = sorted({u.finding.Id for u in ordered[0]})
        if len(ids) >= 2:
            half = set(ids[: (len(ids) + 1) // 2])
            first = [u for u in ordered[0] if u.finding.Id in half]
            second = [u for u in ordered[0] if u.finding.Id not in half]
            return [(_term_heading(first, topic_terms, units), first),
                    (_term_heading(second, topic_terms, units), second)]
    sections: list[tuple[str, list[_Unit]]] = []
    for i, us in enumerate(ordered[:MAX_SECTIONS]):
        if i == MAX_SECTIONS - 1 and len(ordered) > MAX_SECTIONS:
            merged = [u for rest in ordered[i:] for u in rest]
            titles = [_lower_first(_heading(rest[0].finding.Source.Title)) for rest in ordered[i:]]
            heading = _heading("; ".join(titles)) if all(titles) else ""
            if not heading or len("; ".join(titles)) > MAX_HEADING_CHARS:
                heading = _term_heading(merged, topic_terms, units)
            sections.append((heading, merged))
        else:
            source = us[0].finding.Source
            heading = _heading(source.Title) if source.Title.strip() else _term_heading(us, topic_terms, units)
            sections.append((heading, us))
    return sections


def _paragraphs(units: list[_Unit]) -> list[str]:
    """Sentences into paragraphs of about PARAGRAPH_WORDS, never splitting one finding's run."""
    paragraphs: list[list[str]] = [[]]
    size = 0
    for i, u in enumerate(units):
        before = units[i - 1].finding if i else None
        new_source = before is not None and before.Source != u.finding.Source
        new_run = before is not None and before.Id != u.finding.Id
        if paragraphs[-1] and (new_source or (new_run and size >= PARAGRAPH_WORDS)):
            paragraphs.append([])
            size = 0
        paragraphs[-1].append(u.cited())
        size += count_words(u.text)
    return [" ".join(p) for p in paragraphs if p]


def _compose(topic: str, units: list[_Unit], groups: dict[tuple[str, str], int], topic_terms: set[str]) -> str:
    sections = _sections(units, groups, topic_terms)
    headings = [h for h, _ in sections]
    sources = len({(u.finding.Source.Kind, u.finding.Source.Location) for u in units})
    intro = f"This post {_topic_clause(topic)}, drawing on {sources} source{'s' if sources != 1 else ''}."
    if len(headings) > 1:
        intro += f" It is organised in {len(headings)} parts: {_join(headings)}."
    parts = [intro]
    for heading, us in sections:
        parts.append(f"## {heading}")
        parts.extend(_paragraphs(us))
    if len(headings) > 1:
        parts.append(f"In short, the parts above covered {_join([_lower_first(h) for h in headings])}. "
                     "The references below list every source cited.")
    return "\n\n".join(parts)


def _units(brief: WriteBrief, topic_terms: set[str]) -> list[_Unit]:
    """Every citable sentence, in the order the writer should want it."""
    feedback_terms = set(terms(" ".join(brief.feedback))) - topic_terms
    docs = [terms(f"{f.Claim} {f.Quote}") for f in brief.findings]
    topical = bm25_scores(docs, topic_terms)
    wanted = bm25_scores(docs, feedback_terms) if feedback_terms else [0.0] * len(docs)
    order = sorted(range(len(brief.findings)),
                   key=lambda i: (-round(wanted[i], 9), -round(topical[i], 9), brief.findings[i].Id))
    seen: set[str] = set()
    claims: list[list[_Unit]] = []
    extras: list[_Unit] = []
    for i in order:
        f = brief.findings[i]
        quote_sentences = _sentences(f.Quote)
        # A sentence's position is its place in the quote, so a section reads in source order;
        # claim sentences the quote does not hold go first.
        where = {_norm(s): j for j, s in reversed(list(enumerate(quote_sentences)))}
        own: list[_Unit] = []
        for k, s in enumerate(_sentences(f.Claim)):
            if _norm(s) not in seen:
                seen.add(_norm(s))
                own.append(_Unit(f, where.get(_norm(s), k - 1000), s))
        claims.append(own)
        for j, s in enumerate(quote_sentences):
            if _norm(s) not in seen:
                seen.add(_norm(s))
                extras.append(_Unit(f, j, s))
    # Lead sentences of every finding first, then the rest of the claims, then the quotes.
    first = [c[0] for c in claims if c]
    rest = [u for c in claims for u in c[1:]]
    return first + rest + extras


def _target(brief: WriteBrief) -> int:
    span = brief.max_words - brief.min_words
    notes = " ".join([brief.review_notes, *brief.feedback])
    shorter, longer = bool(_SHORTER.search(notes)), bool(_LONGER.search(notes))
    if shorter and not longer:
        return brief.min_words + span * 3 // 10
    if longer and not shorter:
        return brief.min_words + span * 7 // 10
    return brief.min_words + span // 2


def _source_key(unit: _Unit) -> tuple[str, str]:
    return (unit.finding.Source.Kind, unit.finding.Source.Location)


def _fit(brief: WriteBrief, units: list[_Unit], groups: dict[tuple[str, str], int], topic_terms: set[str]) -> str:
    """Add sentences in priority order until the post reaches the target length.

    Every trial is composed in full and measured with both counts (the product's and a plain
    whitespace split), so headings, intro and citations are accounted for exactly. A sentence
    that would take either count past the maximum is skipped; a shorter one may still fit.
    """
    target = _target(brief)
    chosen: list[_Unit] = []
    body = ""
    for unit in units:
        trial = chosen + [unit]
        text = _compose(brief.topic, trial, groups, topic_terms)
        if max(count_words(text), len(text.split())) > brief.max_words:
            continue
        chosen, body = trial, text
        if count_words(body) >= target:
            break
    return body or _compose(brief.topic, units[:1], groups, topic_terms)


def write(brief: WriteBrief) -> DraftOutput:
    title = _title(brief)
    topic_terms = set(terms(brief.topic))
    units = _units(brief, topic_terms)
    if not units:
        body = (f"This post {_topic_clause(brief.topic)}. The research has not produced any citable "
                "material yet, so there is nothing to report.")
        return DraftOutput(title=title, body=body)
    groups: dict[tuple[str, str], int] = {}
    for f in sorted(brief.findings, key=lambda f: f.Id):
        groups.setdefault((f.Source.Kind, f.Source.Location), len(groups))
    # One section per source reads best, so first try the sources of the most wanted sentences
    # alone (at most MAX_SECTIONS of them); draw on the others only when those fall short.
    allowed: list[tuple[str, str]] = []
    for u in units:
        if _source_key(u) not in allowed and len(allowed) < MAX_SECTIONS:
            allowed.append(_source_key(u))
    narrow = [u for u in units if _source_key(u) in allowed]
    body = _fit(brief, narrow, groups, topic_terms)
    if count_words(body) < brief.min_words and len(narrow) < len(units):
        body = _fit(brief, units, groups, topic_terms)
    return DraftOutput(title=title, body=body)


# --- review ------------------------------------------------------------------------------------


def _advice(check: CheckResult, brief: ReviewBrief, n_words: int) -> str:
    if check.Name == "word_range":
        if n_words < brief.min_words:
            return f"Expand the draft by about {brief.min_words - n_words} words of cited facts."
        return f"Cut about {n_words - brief.max_words} words; keep the best-cited facts."
    return {
        "title": "Give the post a one-line title.",
        "citations_resolve": "Cite only the findings listed, by their ids.",
        "has_citations": "Cite the finding each fact rests on as [n].",
    }.get(check.Name, "Fix this before the post can be approved.")


def review(brief: ReviewBrief) -> ReviewOutput:
    checks = brief.checks or check_draft(title=brief.title, body=brief.draft, findings=brief.findings,
                                         min_words=brief.min_words, max_words=brief.max_words)
    failed = [c for c in checks if not c.Passed]
    n_words = count_words(brief.draft)
    notes = "\n".join(f"- {c.Name}: {c.Detail}. {_advice(c, brief, n_words)}" for c in failed)
    requests: list[str] = []
    if n_words < brief.min_words or not brief.findings:
        topic = " ".join(brief.topic.split())
        requests.append(f"More facts about {topic}")
        covered = {t for f in brief.findings for t in terms(f"{f.Claim} {f.Quote}")}
        for word in dict.fromkeys(words(topic)):
            if stem(word) not in covered and len(requests) < 3:
                requests.append(f"What the sources say about {word} in {topic}")
    return ReviewOutput(approved=not failed and bool(checks), notes=notes, research_requests=requests)


# --- the model ---------------------------------------------------------------------------------


class OfflineModel(Model):
    """The model used when none is configured. Costs no tokens; one call is still one call."""

    name = "offline-extractive"
    needs_sources = True

    def respond(self, request: ModelRequest[T]) -> ModelResponse[T]:
        brief = request.brief
        output: BaseModel
        if isinstance(brief, ResearchBrief):
            output = research(brief)
        elif isinstance(brief, WriteBrief):
            output = write(brief)
        elif isinstance(brief, ReviewBrief):
            output = review(brief)
        else:
            raise ModelError(f"the offline model cannot answer a {type(brief).__name__}")
        if not isinstance(output, request.output_type):
            try:
                output = request.output_type.model_validate(output.model_dump())
            except ValidationError as exc:
                raise ModelError(f"the offline {brief.kind} answer does not fit {request.output_type.__name__}: {exc}") from exc
        return ModelResponse(output=output, usage=Usage(Calls=1), model=self.name)  # type: ignore[arg-type]

    def estimate_tokens(self, request: ModelRequest) -> int:
        return 0
