"""The finished post: title, body with citations renumbered to sources, and a references list.

Drafts cite *findings* (``[7]``); readers want *sources*. Several findings may come from one
source, so the renderer maps each finding to its source and numbers the sources in the order
they are first cited. Every ``[n]`` of the rendered body resolves to a References entry.
"""

from __future__ import annotations

import re

from .state import Finding, SourceRef
from .text import CITATION_GROUP

# A run of adjacent citation groups ("[1][2]", "[1, 3]"), with the blanks before it.
_RUN = re.compile(r"([ \t]*)((?:" + CITATION_GROUP.pattern + r")+)")
_FENCE = re.compile(r"(^ {0,3}(?:```|~~~).*?^ {0,3}(?:```|~~~)[^\n]*$)", re.M | re.S)


def _key(ref: SourceRef) -> tuple[str, str]:
    return (ref.Kind, ref.Location)


def renumber(body: str, findings: list[Finding]) -> tuple[str, list[SourceRef]]:
    """The body with finding ids replaced by source numbers, and the cited sources in order.

    Within one run of adjacent citations, repeated sources collapse (``[2][2]`` → ``[2]``); a
    one-group list keeps its ``[1, 3]`` shape. Ids that match no finding are dropped, so the
    result never cites what the references do not list. Fenced code is left untouched.
    """
    by_id = {f.Id: f.Source for f in findings}
    numbers: dict[tuple[str, str], int] = {}
    cited: list[SourceRef] = []

    def number_of(ref: SourceRef) -> int:
        key = _key(ref)
        if key not in numbers:
            numbers[key] = len(numbers) + 1
            cited.append(ref)
        return numbers[key]

    def replace(match: re.Match[str]) -> str:
        blanks, run = match.group(1), match.group(2)
        groups = CITATION_GROUP.findall(run)
        out: list[int] = []
        for group in groups:
            for raw in re.split(r"[ \t]*,[ \t]*", group):
                ref = by_id.get(int(raw))
                if ref is not None:
                    n = number_of(ref)
                    if n not in out:
                        out.append(n)
        if not out:
            return ""
        if len(groups) == 1:
            return f"{blanks}[{', '.join(str(n) for n in out)}]"
        return blanks + "".join(f"[{n}]" for n in out)

    parts = _FENCE.split(body)
    # Even parts are prose, odd parts are fenced code captured by the split.
    rendered = [part if i % 2 else _RUN.sub(replace, part) for i, part in enumerate(parts)]
    return "".join(rendered), cited


def reference_line(number: int, ref: SourceRef) -> str:
    """``1. Title — location``: a file's path as recorded, a URL as a Markdown link."""
    title = re.sub(r"\s+", " ", ref.Title).strip() or ref.Location
    if ref.Kind == "model":
        return f"{number}. {title}"
    if ref.Kind in ("url", "web"):
        location = f"[{ref.Location}]({ref.Location.replace(' ', '%20').replace(')', '%29')})"
    else:
        location = ref.Location
    return f"{number}. {title} — {location}"


def references(sources: list[SourceRef]) -> str:
    """The ``## References`` section for sources already in citation order ("" when none)."""
    if not sources:
        return ""
    lines = [reference_line(i, ref) for i, ref in enumerate(sources, start=1)]
    return "## References\n\n" + "\n".join(lines)


# A citation right before a sentence end: "... claim [2]." (group 1 is the numbers).
_END_CITATION = re.compile(r" \[(\d+(?:, ?\d+)*)\](?=[.!?][\"')\]]?(?:\s|$))")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?\s")


def merge_repeated_citations(text: str) -> str:
    """"A [1]. B [1]. C [1]." reads as "A. B. C [1].": within a paragraph, a citation that the
    very next sentence repeats is left to that sentence. Nothing is dropped that the run does not
    cite again, and sentences with other citations (or none) break the run."""

    def merge(block: str) -> str:
        if block.lstrip().startswith(("#", "```", "~~~", "|")):
            return block
        hits = list(_END_CITATION.finditer(block))
        drop = [
            a for a, b in zip(hits, hits[1:])
            if a.group(1) == b.group(1) and len(_SENTENCE_END.findall(block[a.end():b.start()])) == 1
        ]
        for m in reversed(drop):
            block = block[: m.start()] + block[m.end():]
        return block

    parts = _FENCE.split(text)
    return "".join(p if i % 2 else "\n\n".join(merge(b) for b in p.split("\n\n")) for i, p in enumerate(parts))


def render_post(title: str, body: str, findings: list[Finding]) -> str:
    """The post in Markdown: ``# Title``, the renumbered body, then its references."""
    text, sources = renumber(body.strip(), findings)
    text = merge_repeated_citations(text)
    parts = [f"# {' '.join(title.split())}", text.strip()]
    refs = references(sources)
    if refs:
        parts.append(refs)
    return "\n\n".join(p for p in parts if p) + "\n"
