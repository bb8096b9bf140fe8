from __future__ import annotations

import pytest

from minikubelet.install.bootstrap_token import (
    BootstrapToken,
    TokenError,
    detached_signature,
    parse_token,
    signature_valid,
)

# upstream cluster-bootstrap token/jws tests' vectors (go-jose's output)
CONTENT = "Hello from the other side. I must have called a thousand times."
JOSHUA = BootstrapToken("joshua", "my voice is my passcode")
SIG = "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8"


def test_detached_signature_matches_go_jose() -> None:
    assert detached_signature(CONTENT, JOSHUA) == SIG
    assert detached_signature("", JOSHUA) == \
        "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk"
    assert detached_signature(CONTENT, BootstrapToken("joshua", "")) == \
        "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8"


def test_signature_valid_only_for_the_same_content_token_and_id() -> None:
    assert signature_valid(SIG, CONTENT, JOSHUA)
    assert not signature_valid(SIG + "foo", CONTENT, JOSHUA)
    assert not signature_valid(SIG, CONTENT + " ", JOSHUA)
    assert not signature_valid(SIG, CONTENT, BootstrapToken("joshua", "my voice is my passcodf"))
    assert not signature_valid(SIG, CONTENT, BootstrapToken("joshub", "my voice is my passcode"))
    header, _, mac = SIG.partition("..")
    assert not signature_valid(f"{header}.{mac}", CONTENT, JOSHUA)  # not detached
    assert not signature_valid(f"!!!..{mac}", CONTENT, JOSHUA)
    none_alg = "eyJhbGciOiJub25lIiwia2lkIjoiam9zaHVhIn0"  # {"alg":"none","kid":"joshua"}
    assert not signature_valid(f"{none_alg}..", CONTENT, JOSHUA)


def test_parse_token() -> None:
    assert parse_token("abcdef.0123456789abcdef") == BootstrapToken("abcdef", "0123456789abcdef")
    assert str(parse_token("abcdef.0123456789abcdef")) == "abcdef.0123456789abcdef"
    for bad in ("abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcde", "abcdef:0123456789abcdef", ""):
        with pytest.raises(TokenError, match="was not of the form"):
            parse_token(bad)
