"""HTML escaping without the html package: the same text html.escape(quote=True) writes."""

from __future__ import annotations

import html
import subprocess
import sys

import pytest

from minikubelet.base.html_text import escape


@pytest.mark.parametrize("text", [
    "", "plain/path.log", "a&b", "<script>alert('x')</script>", '"quoted" & \'single\'', "&amp; already",
    "ünïcödé <é>", "journal/../x?y=1&z=2#frag",
])
def test_escape_writes_what_html_escape_writes(text: str) -> None:
    assert escape(text) == html.escape(text, quote=True)


def test_the_kubelet_api_loads_no_html_entities() -> None:
    """The point of the module: the 10250 API's import set has no `html` package (its entity tables)."""
    code = ("import sys, minikubelet.server.kubelet_api, minikubelet.server.node_logs; "
            "print(sorted(m for m in sys.modules if m == 'html' or m.startswith('html.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
