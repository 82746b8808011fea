"""Loading the sources a post may draw on: local files and folders, and web pages by URL.

Policy first (DESIGN.md §5): URLs must be http(s); local paths are read only where a setting
allows them, and only inside the given roots when roots are set, so a remote caller can never
make a deployed server read its own files. Source text is data for the agents, never
instructions: nothing here interprets it beyond turning HTML into plain text.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from .briefs import Passage
from .errors import InvalidRequest, SourceError
from .state import MAX_QUOTE_CHARS, SourceRef
from .text import count_words

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
ALLOWED_CONTENT_TYPES = ("text/html", "text/plain", "text/markdown", "application/xhtml+xml")
MAX_TITLE_CHARS = 300
# A chunk with fewer prose words than this is a stray line, not a paragraph worth citing.
MIN_PASSAGE_WORDS = 5


class SourceDocument(BaseModel):
    """The text of one source, with where it came from."""

    ref: SourceRef
    text: str


def _is_url(source: str) -> bool:
    # A one-letter "scheme" is a Windows drive (C:\...), not a URL.
    scheme = urlsplit(source).scheme
    return len(scheme) > 1 or source.lower().startswith(("http:", "https:", "file:"))


class SourceLoader:
    """Checks and reads sources under one policy (allow local files? which roots? how much?)."""

    def __init__(
        self,
        *,
        allow_local_files: bool,
        roots: tuple[Path, ...] = (),
        fetch_timeout: float = 15.0,
        fetch_max_bytes: int = 2_000_000,
        transport: httpx.BaseTransport | None = None,
        block_private_hosts: bool = False,
    ) -> None:
        self.allow_local_files = allow_local_files
        # On a server, a URL naming a loopback, private or link-local address (the cloud metadata
        # endpoint, say) would let a caller probe the host's network: refuse those when asked.
        self.block_private_hosts = block_private_hosts
        self.roots = tuple(Path(r).expanduser().resolve() for r in roots)
        self.fetch_timeout = fetch_timeout
        self.fetch_max_bytes = fetch_max_bytes
        self.transport = transport

    # --- policy ---------------------------------------------------------------------------

    def _problem(self, source: str) -> str | None:
        """Why ``source`` is not acceptable, or None. Reads no content."""
        if _is_url(source):
            parts = urlsplit(source)
            if parts.scheme.lower() not in ("http", "https"):
                return f"source {source!r}: only http and https URLs are allowed"
            if not parts.hostname:
                return f"source {source!r}: the URL has no host"
            return None
        if not self.allow_local_files:
            return f"source {source!r}: local files are not allowed here; give an http(s) URL"
        path = Path(source).expanduser().resolve()
        if self.roots and not self._inside_roots(path):
            return f"source {source!r}: outside the allowed source folders"
        if not path.exists():
            return f"source {source!r}: no such file or folder"
        if not (path.is_file() or path.is_dir()):
            return f"source {source!r}: not a regular file or folder"
        if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
            return f"source {source!r}: not readable"
        return None

    def _inside_roots(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def validate(self, sources: list[str]) -> None:
        """Refuse unacceptable sources up front, naming the first bad one, without reading them."""
        for i, source in enumerate(sources):
            problem = self._problem(source)
            if problem:
                raise InvalidRequest(problem, field=f"sources[{i}]")

    # --- reading --------------------------------------------------------------------------

    def load(self, sources: list[str]) -> list[SourceDocument]:
        """Every source's text, in the given order (a folder's files sorted by path).

        The policy is checked again here: a worker must not trust that intake validated.
        """
        docs: list[SourceDocument] = []
        for source in sources:
            problem = self._problem(source)
            if problem:
                raise SourceError(problem)
            if _is_url(source):
                docs.append(self._fetch(source))
            else:
                docs.extend(self._load_path(source))
        return docs

    def _load_path(self, source: str) -> list[SourceDocument]:
        path = Path(source).expanduser().resolve()
        if path.is_file():
            return [self._read_file(path, source)]
        files = sorted(
            p for p in path.rglob("*")
            if p.suffix.lower() in TEXT_SUFFIXES
            and p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        docs = [self._read_file(p.resolve(), str(p)) for p in files]
        if not docs:
            raise SourceError(f"source {source!r}: the folder holds no {'/'.join(TEXT_SUFFIXES)} files")
        return docs

    def _read_file(self, path: Path, shown: str) -> SourceDocument:
        # A symlink inside a root may point outside it: check where it really leads.
        if self.roots and not self._inside_roots(path):
            raise SourceError(f"source {shown!r}: outside the allowed source folders")
        try:
            size = path.stat().st_size
            if size > self.fetch_max_bytes:
                raise SourceError(f"source {shown!r}: {size} bytes, more than the {self.fetch_max_bytes} bytes allowed")
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            raise SourceError(f"source {shown!r}: cannot read it ({exc.strerror or exc})") from exc
        text = text.replace("\r\n", "\n").lstrip("\ufeff")
        return SourceDocument(ref=SourceRef(Kind="file", Location=str(path), Title=_markdown_title(text, path.stem)), text=text)

    def _fetch(self, url: str) -> SourceDocument:
        headers = {"User-Agent": "BlogWriter/1.0 (+source loader)", "Accept": "text/html, text/markdown, text/plain;q=0.9"}
        try:
            with httpx.Client(
                transport=self.transport, timeout=self.fetch_timeout, follow_redirects=True, max_redirects=5,
                event_hooks={"request": [self._check_host]},  # runs for every redirect hop too
            ) as client, client.stream("GET", url, headers=headers) as response:
                if response.status_code >= 400:
                    raise SourceError(f"source {url!r}: HTTP {response.status_code}")
                content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if content_type not in ALLOWED_CONTENT_TYPES:
                    raise SourceError(f"source {url!r}: content type {content_type or 'unknown'!r} is not text")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.fetch_max_bytes:
                    raise SourceError(f"source {url!r}: {declared} bytes, more than the {self.fetch_max_bytes} bytes allowed")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > self.fetch_max_bytes:
                        raise SourceError(f"source {url!r}: more than the {self.fetch_max_bytes} bytes allowed")
                raw = bytes(body).decode(response.encoding or "utf-8", errors="replace")
        except httpx.TimeoutException as exc:
            raise SourceError(f"source {url!r}: timed out after {self.fetch_timeout:g} s") from exc
        except httpx.HTTPError as exc:
            raise SourceError(f"source {url!r}: cannot fetch it ({type(exc).__name__}: {exc})") from exc
        except LookupError as exc:  # an unknown charset
            raise SourceError(f"source {url!r}: cannot decode it ({exc})") from exc
        fallback = urlsplit(url).hostname or url
        if content_type in ("text/html", "application/xhtml+xml"):
            title, text = html_to_text(raw)
            title = title or fallback
        else:
            text = raw.replace("\r\n", "\n")
            title = _markdown_title(text, fallback)
        return SourceDocument(ref=SourceRef(Kind="url", Location=url, Title=title[:MAX_TITLE_CHARS]), text=text)


    def _check_host(self, request: httpx.Request) -> None:
        if not self.block_private_hosts:
            return
        host = request.url.host
        try:
            infos = socket.getaddrinfo(host, request.url.port or 443, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise SourceError(f"source host {host!r}: cannot resolve it") from exc
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            if not address.is_global:
                raise SourceError(f"source host {host!r}: {address} is not a public address")


def _markdown_title(text: str, fallback: str) -> str:
    for line in text.splitlines():
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip().rstrip("#").strip()[:MAX_TITLE_CHARS]
    return fallback[:MAX_TITLE_CHARS]


# --- HTML to text ----------------------------------------------------------------------------

_SKIPPED = frozenset({"script", "style", "nav", "header", "footer", "noscript", "template", "svg", "iframe", "head"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
_BLOCKS = frozenset(
    {"p", "div", "section", "article", "main", "aside", "ul", "ol", "li", "table", "tr", "blockquote",
     "pre", "figure", "figcaption", "dl", "dt", "dd", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6"}
)


class _TextExtractor(HTMLParser):
    """Collects visible text as Markdown-ish paragraphs; headings keep their level as ``#``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.current: list[str] = []
        self.prefix = ""
        self.skip_depth = 0
        self.in_title = False
        self.title_parts: list[str] = []

    def _flush(self) -> None:
        text = re.sub(r"\s+", " ", "".join(self.current)).strip()
        if text:
            self.blocks.append(self.prefix + text)
        self.current, self.prefix = [], ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.skip_depth:
            self.in_title = True
        elif tag in _SKIPPED and tag != "head":
            self.skip_depth += 1
        elif tag in _BLOCKS and not self.skip_depth:
            self._flush()
            if re.fullmatch(r"h[1-6]", tag):
                self.prefix = "#" * int(tag[1]) + " "
            elif tag == "li":
                self.prefix = "- "

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS and not self.skip_depth:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _SKIPPED and tag != "head":
            self.skip_depth = max(0, self.skip_depth - 1)
        elif tag in _BLOCKS and not self.skip_depth:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
        elif not self.skip_depth:
            self.current.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML page: visible text in paragraphs, chrome and scripts dropped."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    parser._flush()
    title = re.sub(r"\s+", " ", "".join(parser.title_parts)).strip()
    return title, "\n\n".join(parser.blocks)


# --- Passages --------------------------------------------------------------------------------

_FENCE_LINE = re.compile(r"^ {0,3}(```|~~~)")


def _blocks(text: str) -> list[str]:
    """Paragraph blocks of a Markdown text: split on blank lines and headings; code dropped."""
    blocks: list[str] = []
    current: list[str] = []
    in_fence = False

    def flush() -> None:
        if current:
            blocks.append("\n".join(current).strip())
            current.clear()

    for line in text.splitlines():
        if _FENCE_LINE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not line.strip():
            flush()
        elif re.match(r"^#{1,6}\s", line):
            flush()
            blocks.append(line.strip())
        else:
            current.append(line.rstrip())
    flush()
    return [b for b in blocks if b]


def _split_long(paragraph: str, limit: int) -> list[str]:
    """Pieces of at most ``limit`` characters, cut at sentence ends, then at spaces."""
    if len(paragraph) <= limit:
        return [paragraph]
    pieces: list[str] = []
    current = ""
    for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
        while len(sentence) > limit:
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > 0 else limit
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        pieces.append(current)
    return pieces


def to_passages(docs: list[SourceDocument], *, max_chars: int = 1200) -> list[Passage]:
    """Numbered paragraph chunks of the documents, from 1, in document order.

    Headings are attached to the paragraph that follows them (as ``## Heading`` lines at the top
    of its passage). Paragraphs longer than ``max_chars`` are split at sentence ends; chunks with
    fewer than five prose words are dropped. No passage is longer than ``max_chars`` (capped at
    the quote limit of a finding), so a passage can be quoted whole.
    """
    max_chars = max(200, min(max_chars, MAX_QUOTE_CHARS))
    passages: list[Passage] = []
    for doc in docs:
        headings: list[str] = []
        for block in _blocks(doc.text):
            if re.match(r"^#{1,6}\s", block):
                headings.append(block[: max_chars // 4])
                continue
            head = "\n".join(headings[-2:])
            room = max_chars - (len(head) + 2 if head else 0)
            for piece in _split_long(block, room):
                if count_words(piece) < MIN_PASSAGE_WORDS:
                    continue  # a trivial chunk: its heading waits for the next real paragraph
                text = f"{head}\n\n{piece}" if head else piece
                head, headings = "", []
                passages.append(Passage(number=len(passages) + 1, source=doc.ref, text=text))
    return passages
