"""`/logs/`: the node's log directory as upstream serves it (`http.FileServer(http.Dir("/var/log/"))` behind
`enableSystemLogHandler`; the query options exist only with `enableSystemLogQuery`, off by default, and are not
served here).

Go's FileServer behaviour, as recorded in direct-path-traversal: a directory is listed as an HTML `<pre>` of
links (names sorted, directories with a trailing `/`; an `index.html` in it is served instead), a directory
asked without its trailing slash is redirected (301) to it, a file asked with one is redirected to its name;
files are served with Last-Modified, ranges and a sniffed type. `.`/`..` segments never get here (the API's
path guard answers them first), and every path is resolved below the root before anything is opened.
"""

from __future__ import annotations

import html
import mimetypes
import os
import stat
import urllib.parse
from email.utils import formatdate

from aiohttp import web

LOG_ROOT = "/var/log"
MAX_ENTRIES = 10000
_NOT_FOUND = "404 page not found\n"


def _text(status: int, text: str) -> web.Response:
    resp = web.Response(status=status, text=text, content_type="text/plain", charset="utf-8")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def _redirect(location: str) -> web.Response:
    resp = web.Response(status=301, headers={"Location": location})
    return resp


def directory_listing(names: list[tuple[str, bool]]) -> str:
    """Go's dirList body for (name, is_directory) entries."""
    lines = ['<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n']
    for name, is_dir in sorted(names):
        shown = name + "/" if is_dir else name
        href = urllib.parse.quote(shown, safe="/")
        lines.append(f'<a href="{href}">{html.escape(shown, quote=True)}</a>\n')
    lines.append("</pre>\n")
    return "".join(lines)


def content_type(path: str, head: bytes) -> str:
    """Go's serveContent: the type of the extension, else a sniff of the first 512 bytes (text or binary)."""
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

    async def serve(self, request: web.Request) -> web.StreamResponse:
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

    def _listing(self, path: str, st: os.stat_result) -> web.Response:
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
        resp = web.Response(text=directory_listing(entries), content_type="text/html", charset="utf-8")
        resp.headers["Last-Modified"] = formatdate(st.st_mtime, usegmt=True)
        return resp

    async def _file(self, request: web.Request, path: str, st: os.stat_result) -> web.StreamResponse:
        try:
            with open(path, "rb") as f:
                head = f.read(512)
        except PermissionError:
            return _text(403, "403 Forbidden\n")
        except OSError:
            return _text(404, _NOT_FOUND)
        resp = web.FileResponse(path, headers={"Content-Type": content_type(path, head), "Accept-Ranges": "bytes"})
        return resp
