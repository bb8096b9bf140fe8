"""HTML escaping without the html package: the same text html.escape(quote=True) writes."""

from __future__ import annotations

import html

import pytest

from minikubelet.base.html_text import escape


@pytest.mark.parametrize("text", [
    "", "plain/path.log", "a&b", "<script>alert('x')</script>", '"quoted" & \'single\'', "&amp; already",
    "ünïcödé <é>", "journal/../x?y=1&z=2#frag",
])
def test_escape_writes_what_html_escape_writes(text: str) -> None:
    assert escape(text) == html.escape(text, quote=True)

