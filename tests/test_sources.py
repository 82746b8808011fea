"""Source policy, file/folder/URL loading (against a real local HTTP server) and passages."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from blogwriter.errors import InvalidRequest, SourceError
from blogwriter.sources import SourceDocument, SourceLoader, html_to_text, to_passages
from blogwriter.state import SourceRef
from blogwriter.text import count_words

PAGE = """<!doctype html><html><head><title> Leases &amp; Sweepers </title>
<style>body { color: red }</style><script>var secret = "do not keep";</script></head>
<body><header>Site header menu</header><nav><a href="/">Home</a> Navigation links</nav>
<main><h1>Leases</h1><p>A worker claims a step with a lease.</p>
<p>The sweeper re-enqueues <b>expired</b> leases.</p><ul><li>first point</li><li>second point</li></ul></main>
<footer>Copyright footer text</footer></body></html>"""

RELEASE = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def _send(self, body: bytes, content_type: str, *, length: bool = True, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path
        if path == "/page.html":
            self._send(PAGE.encode(), "text/html; charset=utf-8")
        elif path == "/notes.md":
            self._send(b"# Markdown notes\n\nPlain markdown text here.", "text/markdown")
        elif path == "/plain.txt":
            self._send("Caf\u00e9 text in latin-1.".encode("latin-1"), "text/plain; charset=latin-1")
        elif path == "/image.png":
            self._send(b"\x89PNG....", "image/png")
        elif path == "/big":
            self._send(b"x" * 5_000, "text/plain")
        elif path == "/big-unannounced":
            # No Content-Length: the cap must hold while streaming.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(50):
                self.wfile.write(b"y" * 1_000)
        elif path == "/slow":
            RELEASE.wait(10)  # held until the test ends; the client's timeout must fire first
            self._send(b"too late", "text/plain")
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/notes.md")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(b"not here", "text/plain", status=404)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    RELEASE.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        RELEASE.set()
        httpd.shutdown()
        httpd.server_close()


def _loader(**kw: object) -> SourceLoader:
    return SourceLoader(allow_local_files=kw.pop("allow_local_files", True), **kw)  # type: ignore[arg-type]


# --- policy --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["file:///etc/passwd", "ftp://example.com/x", "javascript:alert(1)", "http:///nohost"])
def test_validate_refuses_non_http_urls_naming_the_source(bad: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        _loader().validate(["https://example.com/ok", bad])
    assert info.value.field == "sources[1]"
    assert bad in str(info.value)


def test_validate_refuses_local_paths_unless_allowed(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("# N\n\nsome words here to read")
    with pytest.raises(InvalidRequest) as info:
        _loader(allow_local_files=False).validate([str(note)])
    assert info.value.field == "sources[0]" and "local files are not allowed" in str(info.value)
    _loader().validate([str(note), "https://example.com/page"])


def test_validate_keeps_paths_inside_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    inside = root / "in.md"
    inside.write_text("inside")
    outside = tmp_path / "out.md"
    outside.write_text("outside")
    loader = _loader(roots=(root,))
    loader.validate([str(inside), str(root)])
    with pytest.raises(InvalidRequest, match="outside the allowed"):
        loader.validate([str(outside)])
    with pytest.raises(InvalidRequest, match="outside the allowed"):
        loader.validate([str(root / ".." / "out.md")])


def test_validate_refuses_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="no such file"):
        _loader().validate([str(tmp_path / "missing.md")])
    locked = tmp_path / "locked.md"
    locked.write_text("secret")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as a user who can read anything")
        with pytest.raises(InvalidRequest, match="not readable"):
            _loader().validate([str(locked)])
    finally:
        locked.chmod(0o600)


def test_load_checks_the_policy_again(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="only http and https"):
        _loader().load(["file:///etc/hostname"])
    note = tmp_path / "n.md"
    note.write_text("text")
    with pytest.raises(SourceError, match="not allowed"):
        _loader(allow_local_files=False).load([str(note)])


# --- files and folders ---------------------------------------------------------------------


def test_load_folder_reads_text_files_recursively_sorted(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Bee title\n\nBody of b.")
    (tmp_path / "a.txt").write_text("Body of a without heading.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.markdown").write_text("Intro line\n# Cee\n\ntext")
    (tmp_path / "skip.py").write_text("print('no')")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "d.md").write_text("# hidden")
    docs = _loader().load([str(tmp_path)])
    assert [Path(d.ref.Location).name for d in docs] == ["a.txt", "b.md", "c.markdown"]
    assert [d.ref.Title for d in docs] == ["a", "Bee title", "Cee"]
    assert all(d.ref.Kind == "file" and Path(d.ref.Location).is_file() for d in docs)
    assert docs[1].text.startswith("# Bee title")


def test_load_file_and_empty_folder(tmp_path: Path) -> None:
    note = tmp_path / "one.md"
    note.write_text("no heading here")
    (doc,) = _loader().load([str(note)])
    assert doc.ref.Title == "one" and doc.ref.Location == str(note.resolve())
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="holds no"):
        _loader().load([str(empty)])


def test_symlink_out_of_a_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("private words")
    (root / "link.md").symlink_to(secret)
    (root / "ok.md").write_text("fine")
    with pytest.raises(SourceError, match="outside the allowed"):
        _loader(roots=(root,)).load([str(root)])


def test_file_size_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_text("word " * 100)
    with pytest.raises(SourceError, match="more than"):
        _loader(fetch_max_bytes=100).load([str(big)])


# --- URLs ----------------------------------------------------------------------------------


def test_html_page_becomes_clean_text(server: str) -> None:
    (doc,) = _loader().load([f"{server}/page.html"])
    assert doc.ref == SourceRef(Kind="url", Location=f"{server}/page.html", Title="Leases & Sweepers")
    for dropped in ("secret", "color", "Site header", "Navigation", "Copyright"):
        assert dropped not in doc.text
    assert doc.text.split("\n\n") == [
        "# Leases",
        "A worker claims a step with a lease.",
        "The sweeper re-enqueues expired leases.",
        "- first point",
        "- second point",
    ]


def test_markdown_and_plain_text_urls(server: str) -> None:
    md, plain = _loader().load([f"{server}/notes.md", f"{server}/plain.txt"])
    assert md.ref.Title == "Markdown notes"
    assert plain.text == "Caf\u00e9 text in latin-1."
    assert plain.ref.Title == "127.0.0.1"


def test_redirect_is_followed(server: str) -> None:
    (doc,) = _loader().load([f"{server}/redirect"])
    assert doc.ref.Title == "Markdown notes"


def test_non_text_content_type_is_refused(server: str) -> None:
    with pytest.raises(SourceError, match="image/png"):
        _loader().load([f"{server}/image.png"])


def test_http_error_status_is_a_source_error(server: str) -> None:
    with pytest.raises(SourceError, match="HTTP 404"):
        _loader().load([f"{server}/missing"])


@pytest.mark.parametrize("path", ["/big", "/big-unannounced"])
def test_size_cap_holds_with_and_without_content_length(server: str, path: str) -> None:
    with pytest.raises(SourceError, match="more than the 1000 bytes"):
        _loader(fetch_max_bytes=1_000).load([server + path])
    (doc,) = _loader(fetch_max_bytes=100_000).load([server + path])
    assert len(doc.text) >= 5_000


def test_slow_server_times_out(server: str) -> None:
    with pytest.raises(SourceError, match="timed out"):
        _loader(fetch_timeout=0.3).load([f"{server}/slow"])


def test_private_hosts_can_be_blocked_even_after_a_redirect(server: str) -> None:
    with pytest.raises(SourceError, match="not a public address"):
        _loader(block_private_hosts=True).load([f"{server}/notes.md"])
    # A public-looking first hop that redirects to a loopback address is refused at the hop.
    def redirect(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": f"{server}/notes.md"})

    loader = _loader(block_private_hosts=True, transport=httpx.MockTransport(redirect))
    loader._check_host = lambda request: SourceLoader._check_host(loader, request) if request.url.host == "127.0.0.1" else None  # type: ignore[method-assign]
    with pytest.raises(SourceError, match="not a public address"):
        loader.load(["https://public.example/start"])


def test_unreachable_host_is_a_source_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(SourceError, match="cannot fetch"):
        _loader(transport=httpx.MockTransport(refuse)).load(["https://example.invalid/x"])


def test_html_to_text_keeps_heading_levels() -> None:
    title, text = html_to_text("<title>T</title><h2>Sub</h2><div>Words <i>here</i></div><script>x</script>")
    assert title == "T"
    assert text == "## Sub\n\nWords here"


# --- passages ------------------------------------------------------------------------------


def _doc(text: str, name: str = "a") -> SourceDocument:
    return SourceDocument(ref=SourceRef(Kind="file", Location=f"/n/{name}.md", Title=name), text=text)


def test_passages_are_numbered_across_documents_with_headings_attached() -> None:
    first = _doc("# Title\n\n## Part one\n\nThe first paragraph has enough words.\n\nA second paragraph also has words.")
    second = _doc("Short.\n\n## Next\n\nok\n\nThe heading waits for this real paragraph here.", "b")
    passages = to_passages([first, second])
    assert [p.number for p in passages] == [1, 2, 3]
    assert passages[0].text == "# Title\n## Part one\n\nThe first paragraph has enough words."
    assert passages[1].text == "A second paragraph also has words."
    assert passages[2].text == "## Next\n\nThe heading waits for this real paragraph here."
    assert passages[2].source.Location == "/n/b.md"


def test_long_paragraphs_are_split_and_code_is_dropped() -> None:
    sentence = "This sentence carries exactly eight words of text. "
    text = "## Long\n\n" + sentence * 60 + "\n\n```\ncode block with several words in it\n```\n"
    passages = to_passages([_doc(text)], max_chars=300)
    assert len(passages) > 5
    assert all(len(p.text) <= 300 for p in passages)
    assert passages[0].text.startswith("## Long\n\n")
    assert not any("code block" in p.text for p in passages)
    assert sum(count_words(p.text) for p in passages) == 8 * 60 + 1


def test_example_sources_make_passages_that_fit_a_quote() -> None:
    root = Path(__file__).resolve().parent.parent / "examples" / "sources"
    docs = _loader().load([str(root)])
    assert len(docs) >= 5
    passages = to_passages(docs)
    assert all(len(p.text) <= 1200 for p in passages)
    assert sum(count_words(d.text) for d in docs) > 1500
