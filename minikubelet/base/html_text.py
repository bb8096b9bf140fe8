"""Text in HTML: the escaping `html.escape(s, quote=True)` does, for the redirect and directory-listing bodies.

Here rather than through the `html` package, whose import loads `html.entities` (the HTML5 entity tables,
+0.4 MiB) for the unescaping the agent never does.
"""

from __future__ import annotations

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def escape(text: str) -> str:
    """`&`, `<`, `>`, `"` and `'` as character references, as html.escape writes them."""
    return text.translate(_ESCAPES)
