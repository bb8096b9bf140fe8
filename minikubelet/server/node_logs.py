"""`/logs/`: the node's log directory as upstream serves it (`http.FileServer(http.Dir("/var/log/"))` behind
`enableSystemLogHandler`; the query options exist only with `enableSystemLogQuery`, off by default, and are not
served here).

Go's FileServer behaviour, as recorded in direct-path-traversal: a directory is listed as an HTML `<pre>` of
links (names sorted, directories with a trailing `/`; an `index.html` in it is served instead), a directory
asked without its trailing slash is redirected (301) to it, a file asked with one is redirected to its name;
files are served with Last-Modified, If-Modified-Since, one byte range and a sniffed type. `.`/`..` segments never get here (the API's
path guard answers them first), and every path is resolved below the root before anything is opened.
"""

from __future__ import annotations

import os
import stat
import urllib.parse

from minikubelet.base.html_text import escape
from minikubelet.base.http_date import format_http_date, parse_http_date
from minikubelet.server.routes import Answer, Request, Response, Streamed, Write

LOG_ROOT = "/var/log"
MAX_ENTRIES = 10000
CHUNK = 64 * 1024
_NOT_FOUND = "404 page not found\n"


def _text(status: int, text: str) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8", {"X-Content-Type-Options": "nosniff"})


def _redirect(location: str) -> Response:
    return Response(301, headers={"Location": location})


def byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """The one range asked for as (first, last) inclusive; None: the whole file (no Range, or several ranges,
    served whole); "unsatisfiable" for a range outside the file or one that does not parse."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first_text, sep, last_text = header[len("bytes="):].strip().partition("-")
    if not sep or not (first_text.isdigit() or last_text.isdigit()):
        return "unsatisfiable"
    if not first_text:  # the last n bytes
        n = int(last_text)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - n), size - 1
    first = int(first_text)
    if not last_text.isdigit() and last_text:
        return "unsatisfiable"
    last = min(int(last_text), size - 1) if last_text else size - 1
    if first >= size or last < first:
        return "unsatisfiable"
    return first, last


def _not_modified_since(request: Request, mtime: float) -> bool:
    since = request.headers.get("If-Modified-Since")
    if not since:
        return False
    when = parse_http_date(since)
    return when is not None and int(mtime) <= when


def directory_listing(names: list[tuple[str, bool]]) -> str:
    """Go's dirList body for (name, is_directory) entries."""
    lines = ['<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n']
    for name, is_dir in sorted(names):
        shown = name + "/" if is_dir else name
        href = urllib.parse.quote(shown, safe="/")
        lines.append(f'<a href="{href}">{escape(shown)}</a>\n')
    lines.append("</pre>\n")
    return "".join(lines)


def content_type(path: str, head: bytes) -> str:
    """Go's serveContent: the type of the extension, else a sniff of the first 512 bytes (text or binary)."""
    import mimetypes  # by the first file served: the agent has no other use for it

    guessed, _ = mimetypes.guess_type(path)
    if guessed:
        return guessed + ("; charset=utf-8" if guessed.startswith("text/") else "")
    if any(b < 0x20 and b not in (0x09, 0x0A, 0x0C, 0x0D, 0x1B) for b in head):
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


def resolve(root: str, rel: str) -> str | None:
    """`rel` under `root`, or None when it would leave it (a symlink may point anywhere, as with Go's http.Dir,
    but a path component never climbs above the root)."""
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") or "\x00" in p for p in parts):
        return None
    return os.path.join(root, *parts)


class NodeLogs:
    def __init__(self, root: str = LOG_ROOT) -> None:
        self.root = root

    async def serve(self, request: Request) -> Answer:
        rel = request.path[len("/logs/"):] if request.path.startswith("/logs/") else ""
        path = resolve(self.root, rel)
        if path is None:
            return _text(404, _NOT_FOUND)
        try:
            st = os.stat(path)
        except PermissionError:
            return _text(403, "403 Forbidden\n")
        except OSError:
            return _text(404, _NOT_FOUND)
        name = rel.rstrip("/").rsplit("/", 1)[-1]
        if stat.S_ISDIR(st.st_mode):
            if rel and not rel.endswith("/"):
                return _redirect(name + "/")
            index = os.path.join(path, "index.html")
            if os.path.isfile(index):
                return await self._file(request, index, os.stat(index))
            return self._listing(path, st)
        if rel.endswith("/"):
            return _redirect("../" + name)
        if not stat.S_ISREG(st.st_mode):
            return _text(404, _NOT_FOUND)
        return await self._file(request, path, st)

    def _listing(self, path: str, st: os.stat_result) -> Response:
        try:
            with os.scandir(path) as it:
                entries: list[tuple[str, bool]] = []
                for entry in it:
                    if len(entries) >= MAX_ENTRIES:
                        break
                    try:
                        entries.append((entry.name, entry.is_dir()))
                    except OSError:
                        entries.append((entry.name, False))
        except PermissionError:
            return _text(403, "403 Forbidden\n")
        except OSError:
            return _text(500, "Error reading directory\n")
        return Response(200, directory_listing(entries).encode(), "text/html; charset=utf-8",
                        {"Last-Modified": format_http_date(st.st_mtime)})

    async def _file(self, request: Request, path: str, st: os.stat_result) -> Answer:
        try:
            f = open(path, "rb")  # closed by the response's finish
        except PermissionError:
            return _text(403, "403 Forbidden\n")
        except OSError:
            return _text(404, _NOT_FOUND)
        try:
            head = f.read(512)
            size = os.fstat(f.fileno()).st_size
        except OSError:
            f.close()
            return _text(404, _NOT_FOUND)
        headers = {"Last-Modified": format_http_date(st.st_mtime), "Accept-Ranges": "bytes"}
        if _not_modified_since(request, st.st_mtime):
            f.close()
            return Response(304, headers=headers)
        wanted = byte_range(request.headers.get("Range"), size)
        if wanted == "unsatisfiable":
            f.close()
            return Response(416, b"invalid range: failed to overlap\n", "text/plain; charset=utf-8",
                            {"Content-Range": f"bytes */{size}"})
        status, first, last = 200, 0, size - 1
        if isinstance(wanted, tuple):
            status, (first, last) = 206, wanted
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"

        async def produce(write: Write) -> None:
            f.seek(first)
            left = last - first + 1
            while left > 0 and (chunk := f.read(min(CHUNK, left))):
                left -= len(chunk)
                await write(chunk)

        return Streamed(produce, status, content_type(path, head), headers, length=max(0, last - first + 1),
                        finish=f.close)
