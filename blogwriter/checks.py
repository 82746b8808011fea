"""Deterministic checks of a draft, made by code and never by the model (DESIGN.md §4)."""

from __future__ import annotations

from .state import CheckResult, Finding
from .text import cited_ids, count_words

CHECK_NAMES = ("title", "word_range", "citations_resolve", "has_citations")


def _title(title: str) -> CheckResult:
    stripped = title.strip()
    if not stripped:
        return CheckResult(Name="title", Passed=False, Detail="the title is empty")
    if "\n" in stripped or "\r" in stripped:
        return CheckResult(Name="title", Passed=False, Detail="the title must be a single line")
    return CheckResult(Name="title", Passed=True, Detail=f"title: {stripped}")


def _word_range(body: str, min_words: int, max_words: int) -> CheckResult:
    n = count_words(body)
    if n < min_words:
        verdict = f"{min_words - n} words too short"
    elif n > max_words:
        verdict = f"{n - max_words} words too long"
    else:
        verdict = "inside the range"
    return CheckResult(
        Name="word_range",
        Passed=min_words <= n <= max_words,
        Detail=f"{n} words; the range is {min_words}-{max_words} ({verdict})",
    )


def _citations_resolve(ids: list[int], findings: list[Finding]) -> CheckResult:
    known = {f.Id for f in findings}
    unknown = sorted({i for i in ids if i not in known})
    if unknown:
        return CheckResult(
            Name="citations_resolve",
            Passed=False,
            Detail="unknown citation ids: " + ", ".join(f"[{i}]" for i in unknown),
        )
    return CheckResult(Name="citations_resolve", Passed=True, Detail=f"{len(set(ids))} distinct findings cited, all known")


def _has_citations(ids: list[int]) -> CheckResult:
    if not ids:
        return CheckResult(Name="has_citations", Passed=False, Detail="the draft cites no finding; cite facts as [n]")
    return CheckResult(Name="has_citations", Passed=True, Detail=f"{len(ids)} citations")


def check_draft(*, title: str, body: str, findings: list[Finding], min_words: int, max_words: int) -> list[CheckResult]:
    """The four named checks, in a fixed order: title, word_range, citations_resolve, has_citations."""
    ids = cited_ids(body)
    return [
        _title(title),
        _word_range(body, min_words, max_words),
        _citations_resolve(ids, findings),
        _has_citations(ids),
    ]


def all_passed(results: list[CheckResult]) -> bool:
    """True when every check passed (and there was at least one)."""
    return bool(results) and all(r.Passed for r in results)
