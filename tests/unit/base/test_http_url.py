"""base.http1.URL: an absolute http(s) URL split as a request needs it (Go's url.URL fields)."""

from __future__ import annotations

import pytest

from minikubelet.base.http1 import URL


def test_fields_of_a_plain_url() -> None:
    url = URL.parse("http://Example.test:8080/a/b?x=1&y=2#frag")
    assert (url.scheme, url.host, url.port, url.authority) == ("http", "Example.test", 8080, "Example.test:8080")
    assert url.target == "/a/b?x=1&y=2" and url.username is None and not url.tls


def test_default_ports_and_an_empty_path() -> None:
    assert (URL.parse("https://h").port, URL.parse("https://h").target, URL.parse("https://h").authority) == (443, "/", "h")
    assert URL.parse("HTTP://h").port == 80 and URL.parse("HTTP://h").scheme == "http"


def test_an_ipv6_literal() -> None:
    url = URL.parse("http://[fd00::1]:8080/x")
    assert (url.host, url.port, url.authority) == ("fd00::1", 8080, "[fd00::1]:8080")


def test_user_information_is_unescaped_and_kept_out_of_the_authority() -> None:
    url = URL.parse("https://us%20er:p%40ss@h:1/p")
    assert (url.username, url.password, url.authority) == ("us er", "p@ss", "h:1")


def test_a_target_is_escaped_as_a_request_line_needs() -> None:
    assert URL.parse("http://h/a b/%2F?q=a b").target == "/a%20b/%2F?q=a%20b"


def test_a_relative_location_joins() -> None:
    base = URL.parse("http://h:1/a/b?q")
    assert base.join("c").text == "http://h:1/a/c"
    assert base.join("/d?e=1").target == "/d?e=1"
    assert base.join("//other:2/x").authority == "other:2"


@pytest.mark.parametrize("text", ["ftp://h/x", "file:///etc/passwd", "http://[::1/x", "http:///x", "http://h:99999/",
                                  "/relative"])
def test_unusable_urls_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError):
        URL.parse(text)
