"""The offline extractive writer: research, write and review from the brief alone."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from blogwriter.briefs import (DraftOutput, Passage, ResearchBrief, ResearchOutput, ReviewBrief, ReviewOutput,
                               WriteBrief)
from blogwriter.checks import all_passed, check_draft
from blogwriter.errors import ModelError
from blogwriter.models.base import ModelRequest
from blogwriter.models.offline import OfflineModel
from blogwriter.render import render_post
from blogwriter.sources import SourceLoader, to_passages
from blogwriter.state import CheckResult, Finding, SourceRef
from blogwriter.text import clean_sentence, cited_ids, count_words, split_sentences, stem, terms

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "sources"
TOPIC = "How BlogWriter turns a topic into a cited blog post"
MODEL = OfflineModel()

SOURDOUGH = {
    "starter.md": """# Keeping a sourdough starter

A sourdough starter is a culture of wild yeast and lactic acid bacteria living in a paste of flour and water. Bakers keep it alive by feeding it fresh flour and water, usually once a day when it lives on the counter.

## Feeding ratios

A common feeding ratio is one part starter, one part flour and one part water by weight. A stiffer starter with less water ferments more slowly and tastes more acidic. Whole rye flour speeds fermentation because it carries more nutrients and more wild microbes than white flour.

## Signs of a healthy starter

A healthy starter roughly doubles in volume within four to eight hours of a feeding at room temperature. It smells pleasantly sour, a little like yogurt, and its surface is domed and full of bubbles at its peak. A layer of grey liquid on top, called hooch, means the starter is hungry and should be fed.
""",
    "dough.md": """# Mixing and fermenting the dough

Most sourdough loaves start with an autolyse, a rest of flour and water before the starter and salt go in. The rest lets the flour hydrate fully and makes the dough easier to stretch.

During bulk fermentation the dough rises slowly for four to six hours at about twenty-four degrees Celsius. Bakers strengthen it with sets of stretch and folds every half hour during the first two hours instead of kneading.

Bulk fermentation ends when the dough has grown by about half, feels airy and shows bubbles on its sides. Cutting fermentation short gives a dense crumb, while letting it run too long gives a slack dough that spreads in the oven.
""",
    "baking.md": """# Shaping and baking

After bulk fermentation the dough is divided, pre-shaped into a loose round and rested for twenty minutes. The final shaping builds surface tension so the loaf holds its form and rises upward in the oven.

Many bakers proof the shaped loaf overnight in the refrigerator. The cold slows the yeast more than the bacteria, which deepens the sour flavour and makes the loaf easier to score.

A covered cast-iron pot traps steam during the first twenty minutes of baking at about two hundred and fifty degrees Celsius. The steam keeps the crust soft long enough for the loaf to expand, and removing the lid afterwards lets the crust brown and crisp.
""",
}


# --- helpers -----------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _findings(output: ResearchOutput, passages: list[Passage]) -> list[Finding]:
    by_number = {p.number: p for p in passages}
    return [
        Finding(Id=i, Claim=f.claim, Quote=f.quote, Source=by_number[f.passage].source)
        for i, f in enumerate(output.findings, start=1)
    ]


def _corpus(sources: list[str], topic: str, *, max_findings: int = 20) -> tuple[list[Passage], list[Finding]]:
    passages = to_passages(SourceLoader(allow_local_files=True).load(sources))
    brief = ResearchBrief(topic=topic, min_words=600, max_words=900, round=1, passages=passages,
                          max_findings=max_findings)
    return passages, _findings(MODEL.respond(_request(brief, ResearchOutput)).output, passages)


def _request(brief: ResearchBrief | WriteBrief | ReviewBrief, output_type: type[BaseModel]) -> ModelRequest:
    agent = {"research": "researcher", "write": "author", "review": "reviewer"}[brief.kind]
    return ModelRequest(agent=agent, brief=brief, instructions="", prompt="", output_type=output_type)


def _write(findings: list[Finding], lo: int, hi: int, topic: str = TOPIC, **kw: Any) -> DraftOutput:
    brief = WriteBrief(topic=topic, min_words=lo, max_words=hi, findings=findings, **kw)
    return MODEL.respond(_request(brief, DraftOutput)).output


def _content_paragraphs(body: str) -> list[str]:
    """Paragraphs that must be made of cited finding sentences (not headings, intro or closing)."""
    paragraphs = [p for p in body.split("\n\n") if p.strip()]
    return [p for p in paragraphs[1:] if not p.startswith("## ") and not p.startswith("In short,")]


def _assert_grounded(body: str, findings: list[Finding]) -> None:
    """Every content sentence carries a citation and is copied from the finding it cites."""
    by_id = {f.Id: f for f in findings}
    content = _content_paragraphs(body)
    assert content, "the draft has no content paragraph"
    for paragraph in content:
        pieces = re.findall(r"(.+?) \[(\d+)\]([.!?][\"')\]]*)(?:\s+|$)", paragraph, re.S)
        rebuilt = " ".join(f"{a} [{b}]{c}" for a, b, c in pieces)
        assert rebuilt == paragraph, f"uncited text in: {paragraph!r}"
        for sentence, fid, punct in pieces:
            finding = by_id[int(fid)]
            source = f" {_norm(finding.Claim + ' ' + clean_sentence(finding.Quote))} "
            assert f" {_norm(sentence + punct)} " in source, f"{sentence!r} is not from finding {fid}"


def _assert_fits(title: str, body: str, findings: list[Finding], lo: int, hi: int) -> None:
    checks = check_draft(title=title, body=body, findings=findings, min_words=lo, max_words=hi)
    assert all_passed(checks), [c for c in checks if not c.Passed]
    assert lo <= count_words(body) <= hi
    assert lo <= len(body.split()) <= hi
    assert 2 <= len(re.findall(r"^## ", body, re.M)) <= 4


def _material(findings: list[Finding]) -> int:
    return sum(count_words(f.Claim) + count_words(f.Quote) for f in findings)


# --- research ----------------------------------------------------------------------------------


def _passages() -> list[Passage]:
    src = SourceRef(Kind="file", Location="/n/x.md", Title="X")
    texts = [
        "## Leases\n\nA worker claims a step with a lease. The lease expires after five minutes. Cats sleep a lot.",
        "The sweeper finds expired leases every minute. It enqueues the step again with the same sequence.",
        "Bread rises when yeast ferments sugars in the dough. Salt slows the yeast down a little.",
        "Each worker drops duplicate messages whose sequence is stale. Duplicates cost no tokens.",
    ]
    return [Passage(number=i, source=src, text=t) for i, t in enumerate(texts, start=1)]


def _research(**kw: Any) -> ResearchOutput:
    brief = ResearchBrief(topic=kw.pop("topic", "worker leases and the sweeper"), min_words=100, max_words=200,
                          round=1, passages=kw.pop("passages", _passages()), **kw)
    return MODEL.respond(_request(brief, ResearchOutput)).output


def test_research_takes_topical_sentences_of_ranked_passages() -> None:
    out = _research()
    passages = {p.number: p for p in _passages()}
    assert {f.passage for f in out.findings[:2]} == {1, 2}
    assert 3 not in [f.passage for f in out.findings]  # nothing about leases or workers in the bread passage
    for fact in out.findings:
        source_sentences = split_sentences(passages[fact.passage].text)
        claim_sentences = split_sentences(fact.claim)
        assert 1 <= len(claim_sentences) <= 3
        assert all(s in source_sentences for s in claim_sentences)
        assert fact.quote == passages[fact.passage].text
        assert fact.url is None and fact.title is None
    assert "Cats sleep a lot." not in out.findings[0].claim


def test_research_respects_max_findings_and_known_claims() -> None:
    assert len(_research(max_findings=1).findings) == 1
    first = _research()
    again = _research(known_claims=[f.claim for f in first.findings])
    known = {s for f in first.findings for s in split_sentences(f.claim)}
    assert all(s not in known for f in again.findings for s in split_sentences(f.claim))


def test_research_uses_reviewer_requests_in_the_query() -> None:
    plain = _research(topic="worker leases")
    asked = _research(topic="worker leases", requests=["duplicate messages"])
    assert 4 in [f.passage for f in asked.findings]
    assert [f.passage for f in asked.findings] != [f.passage for f in plain.findings]


def test_research_refinements_are_new_terms() -> None:
    out = _research()
    topic_terms = set(terms("worker leases and the sweeper"))
    assert out.refinements and len(out.refinements) <= 5
    assert all(stem(r.lower()) not in topic_terms for r in out.refinements)


def test_research_is_deterministic() -> None:
    assert _research() == _research()


# --- writing -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_findings() -> list[Finding]:
    return _corpus([str(EXAMPLES)], TOPIC)[1]


@pytest.mark.parametrize(("lo", "hi"), [(600, 900), (300, 450), (1000, 1400)], ids=["600-900", "300-450", "1000-1400"])
def test_example_sources_make_a_post_inside_the_range(example_findings: list[Finding], lo: int, hi: int) -> None:
    assert _material(example_findings) > hi, "the example sources should hold enough text for this range"
    draft = _write(example_findings, lo, hi)
    assert draft.title == TOPIC
    _assert_fits(draft.title, draft.body, example_findings, lo, hi)
    _assert_grounded(draft.body, example_findings)


def test_rendered_example_post_cites_real_files(example_findings: list[Finding]) -> None:
    draft = _write(example_findings, 600, 900)
    post = render_post(draft.title, draft.body, example_findings)
    body, refs = post.split("\n## References\n")
    entries = dict(re.findall(r"^(\d+)\. .+ — (.+)$", refs, re.M))
    assert set(map(int, entries)) == set(cited_ids(body)) == set(range(1, len(entries) + 1))
    example_files = {str(p.resolve()) for p in EXAMPLES.glob("*.md")}
    assert set(entries.values()) <= example_files
    assert len(entries) >= 2


def test_a_different_small_corpus(tmp_path: Path) -> None:
    for name, text in SOURDOUGH.items():
        (tmp_path / name).write_text(text)
    topic = "Baking sourdough bread: starter, fermentation and baking"
    _, findings = _corpus([str(tmp_path)], topic)
    assert {f.Source.Title for f in findings} == {"Keeping a sourdough starter", "Mixing and fermenting the dough",
                                                  "Shaping and baking"}
    assert _material(findings) > 450
    for lo, hi in [(150, 250), (300, 450)]:
        draft = _write(findings, lo, hi, topic=topic)
        _assert_fits(draft.title, draft.body, findings, lo, hi)
        _assert_grounded(draft.body, findings)
        assert "sourdough" in draft.body.lower() and "BlogWriter" not in draft.body


def test_writing_is_deterministic(example_findings: list[Finding]) -> None:
    assert _write(example_findings, 600, 900) == _write(example_findings, 600, 900)


def test_too_little_material_gives_a_short_draft_without_padding() -> None:
    src = SourceRef(Kind="file", Location="/n/a.md", Title="A")
    findings = [Finding(Id=1, Claim="Leases expire after five minutes of silence.", Quote="", Source=src),
                Finding(Id=2, Claim="The sweeper runs once every minute.", Quote="", Source=src)]
    draft = _write(findings, 300, 450, topic="Leases")
    assert count_words(draft.body) < 100
    assert sorted(set(cited_ids(draft.body))) == [1, 2]
    _assert_grounded(draft.body, findings)


def test_no_findings_means_no_citations() -> None:
    draft = _write([], 300, 450)
    assert cited_ids(draft.body) == []
    assert not all_passed(check_draft(title=draft.title, body=draft.body, findings=[], min_words=300, max_words=450))


def test_source_markers_in_quotes_never_become_citations() -> None:
    src = SourceRef(Kind="file", Location="/n/a.md", Title="A")
    findings = [Finding(Id=5, Claim="Queues deliver messages at least once [2].",
                        Quote="Queues deliver messages at least once [2]. See [the docs](http://x.org) for more detail [3].",
                        Source=src)]
    draft = _write(findings, 5, 60, topic="Queues")
    assert set(cited_ids(draft.body)) == {5}
    assert "http://x.org" not in draft.body


def test_feedback_pulls_matching_findings_into_a_revision(example_findings: list[Finding]) -> None:
    first = _write(example_findings, 300, 450)
    left_out = [f for f in example_findings if f.Id not in cited_ids(first.body)]
    assert left_out, "a short post should not use every finding"
    # A word of a left-out finding that the first draft never mentions.
    wanted, word = next(
        (f, w) for f in left_out for w in re.findall(r"[A-Za-z]{6,}", f.Claim)
        if w.lower() not in first.body.lower() and stem(w.lower()) in terms(f.Claim)
    )
    revised = _write(example_findings, 300, 450, title=first.title, draft=first.body, revision=1,
                     feedback=[f"Please say more about {word}."])
    assert word.lower() in revised.body.lower()
    assert any(word.lower() in (f.Claim + f.Quote).lower() for f in example_findings if f.Id in cited_ids(revised.body))
    assert wanted.Id in cited_ids(revised.body) or any(
        word.lower() in f.Claim.lower() for f in example_findings if f.Id in cited_ids(revised.body)
    )
    _assert_fits(revised.title, revised.body, example_findings, 300, 450)


def test_length_notes_move_the_target_inside_the_range(example_findings: list[Finding]) -> None:
    middle = count_words(_write(example_findings, 600, 900).body)
    shorter = _write(example_findings, 600, 900, revision=1, title="Kept title",
                     review_notes="- word_range: 950 words; the range is 600-900 (50 words too long)")
    longer = _write(example_findings, 600, 900, revision=1, title="Kept title",
                    review_notes="- word_range: 560 words; the range is 600-900 (40 words too short)")
    assert count_words(shorter.body) < middle < count_words(longer.body)
    assert shorter.title == longer.title == "Kept title"
    for draft in (shorter, longer):
        _assert_fits(draft.title, draft.body, example_findings, 600, 900)


# --- review ------------------------------------------------------------------------------------


def _review(body: str, findings: list[Finding], checks: list[CheckResult] | None = None) -> ReviewOutput:
    if checks is None:
        checks = check_draft(title="T", body=body, findings=findings, min_words=20, max_words=60)
    brief = ReviewBrief(topic="Leases", min_words=20, max_words=60, title="T", draft=body, findings=findings,
                        checks=checks)
    return MODEL.respond(_request(brief, ReviewOutput)).output


SRC = SourceRef(Kind="file", Location="/n/a.md", Title="A")
ONE = [Finding(Id=1, Claim="Leases expire.", Source=SRC)]


def test_review_approves_exactly_when_every_check_passed() -> None:
    good = " ".join(["word"] * 30) + " [1]."
    verdict = _review(good, ONE)
    assert verdict.approved and verdict.notes == "" and verdict.research_requests == []
    bad_ids = " ".join(["word"] * 30) + " [4]."
    verdict = _review(bad_ids, ONE)
    assert not verdict.approved
    assert "citations_resolve" in verdict.notes and "[4]" in verdict.notes


def test_review_of_a_short_draft_asks_for_research() -> None:
    verdict = _review("too few words [1].", ONE)
    assert not verdict.approved
    assert "word_range" in verdict.notes and "Expand" in verdict.notes
    assert verdict.research_requests and "Leases" in verdict.research_requests[0]


def test_review_computes_checks_when_none_were_given() -> None:
    verdict = _review("no citation here but words enough " * 5, ONE, checks=[])
    assert not verdict.approved
    assert "has_citations" in verdict.notes


def test_review_notes_every_failed_check() -> None:
    checks = [CheckResult(Name="title", Passed=False, Detail="the title is empty"),
              CheckResult(Name="custom", Passed=False, Detail="something odd"),
              CheckResult(Name="has_citations", Passed=True)]
    verdict = _review(" ".join(["word"] * 30) + " [1].", ONE, checks=checks)
    assert not verdict.approved
    assert verdict.notes.count("\n") == 1 and "title" in verdict.notes and "custom: something odd" in verdict.notes


# --- the model seam ----------------------------------------------------------------------------


def test_respond_reports_no_tokens_and_its_name() -> None:
    brief = ResearchBrief(topic="leases", min_words=1, max_words=2, round=1, passages=_passages())
    response = MODEL.respond(_request(brief, ResearchOutput))
    assert isinstance(response.output, ResearchOutput)
    assert response.model == "offline-extractive" == MODEL.name
    assert response.usage.TotalTokens == response.usage.InputTokens == response.usage.OutputTokens == 0
    assert MODEL.estimate_tokens(_request(brief, ResearchOutput)) == 0


def test_respond_refuses_an_output_type_that_does_not_fit_the_brief() -> None:
    brief = ResearchBrief(topic="leases", min_words=1, max_words=2, round=1, passages=_passages())
    with pytest.raises(ModelError):
        MODEL.respond(_request(brief, DraftOutput))
