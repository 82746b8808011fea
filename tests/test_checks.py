"""The deterministic draft checks."""

from __future__ import annotations

from blogwriter.checks import all_passed, check_draft
from blogwriter.state import CheckResult, Finding, SourceRef

SRC = SourceRef(Kind="file", Location="/n/a.md", Title="A")
FINDINGS = [Finding(Id=i, Claim=f"claim {i}", Source=SRC) for i in (1, 2, 3)]


def _by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.Name: r for r in results}


def _body(n_words: int, cite: str = " [1]") -> str:
    return " ".join(["word"] * n_words) + cite + "."


def test_a_good_draft_passes_every_check() -> None:
    results = check_draft(title="A title", body=_body(10), findings=FINDINGS, min_words=5, max_words=20)
    assert [r.Name for r in results] == ["title", "word_range", "citations_resolve", "has_citations"]
    assert all_passed(results)


def test_empty_or_multiline_title_fails() -> None:
    for title in ("", "   ", "Two\nlines"):
        results = _by_name(check_draft(title=title, body=_body(10), findings=FINDINGS, min_words=5, max_words=20))
        assert not results["title"].Passed


def test_word_range_detail_gives_count_and_range() -> None:
    short = _by_name(check_draft(title="T", body=_body(3), findings=FINDINGS, min_words=5, max_words=20))
    assert not short["word_range"].Passed
    assert "3 words" in short["word_range"].Detail and "5-20" in short["word_range"].Detail
    assert "too short" in short["word_range"].Detail
    long = _by_name(check_draft(title="T", body=_body(25), findings=FINDINGS, min_words=5, max_words=20))
    assert not long["word_range"].Passed and "too long" in long["word_range"].Detail


def test_word_range_bounds_are_inclusive_and_ignore_citations() -> None:
    body = _body(5, cite=" [1][2]")
    assert _by_name(check_draft(title="T", body=body, findings=FINDINGS, min_words=5, max_words=5))["word_range"].Passed


def test_unknown_citations_are_listed() -> None:
    results = _by_name(check_draft(title="T", body="a b c [1] d [7] e [4, 7].", findings=FINDINGS, min_words=1, max_words=50))
    assert not results["citations_resolve"].Passed
    assert "[4]" in results["citations_resolve"].Detail and "[7]" in results["citations_resolve"].Detail
    assert "[1]" not in results["citations_resolve"].Detail


def test_a_draft_without_citations_fails_has_citations() -> None:
    results = _by_name(check_draft(title="T", body="plain text [link](http://x)", findings=FINDINGS, min_words=1, max_words=50))
    assert not results["has_citations"].Passed
    assert results["citations_resolve"].Passed


def test_all_passed_needs_every_check_and_at_least_one() -> None:
    ok = CheckResult(Name="a", Passed=True)
    bad = CheckResult(Name="b", Passed=False)
    assert all_passed([ok])
    assert not all_passed([ok, bad])
    assert not all_passed([])
