"""Trace redaction of secrets hidden from its patterns (issue 31, item 9)."""

from __future__ import annotations

import base64
import json
import sys
import unicodedata

import pytest

from acp_proxy.core.hidden_secrets import FORMAT_CHARACTERS
from acp_proxy.core.trace import redact

GITHUB = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9v"
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def chunk(text: str) -> str:
    """An agent_message_chunk carrying ``text``."""
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    params = {"sessionId": "S", "update": update}
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


@pytest.mark.parametrize("mark", ["\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e"])
def test_a_token_broken_by_a_format_character_is_redacted(mark: str) -> None:
    """`ghp_ab<U+200B>cd...` is the token to a reader: redacted, the mark gone with it."""
    broken = GITHUB[:8] + mark + GITHUB[8:]
    out = redact(chunk(f"here: {broken} done"))
    assert GITHUB[8:] not in out
    assert "[REDACTED]" in out
    assert "done" in out


def test_format_characters_stay_where_nothing_is_hidden() -> None:
    """A text whose format characters hide no secret is written unchanged."""
    text = chunk("zero\u200bwidth and a joiner\u200d here")
    assert redact(text) == text


def test_a_bare_aws_secret_access_key_is_redacted_and_a_digest_is_not() -> None:
    """40 mixed-case base64 characters alone: redacted; a SHA-1 hex digest stays."""
    out = redact(chunk(f"key {AWS} and commit 0123456789abcdef0123456789abcdef01234567"))
    assert AWS not in out
    assert "0123456789abcdef0123456789abcdef01234567" in out
    # part of a longer base64 run is not a bare key
    longer = "A" + AWS + "b3"
    assert longer in redact(chunk(f"blob {longer} end"))


@pytest.mark.parametrize(
    "encode", [base64.b64encode, base64.urlsafe_b64encode], ids=["standard", "urlsafe"]
)
@pytest.mark.parametrize(
    "secret",
    [GITHUB, "sk-ant-" + "x" * 24, "AKIA" + "ABCDEFGHIJKLMNOP", f"aws_secret={AWS}"],
)
def test_a_token_in_base64_is_redacted(encode: object, secret: str) -> None:
    """`echo <base64 of a token> | base64 -d`: the whole run is redacted."""
    blob = encode(f"export T={secret}\n".encode()).decode()  # type: ignore[operator]
    out = redact(chunk(f"run: echo {blob} | base64 -d"))
    assert blob not in out
    assert "[REDACTED]" in out


def test_base64_without_a_token_stays() -> None:
    """An ordinary base64 payload (an image, a text) is written unchanged."""
    blob = base64.b64encode(b"just some harmless text, nothing secret in it").decode()
    text = chunk(f"data {blob}")
    assert redact(text) == text


def test_the_format_character_class_holds_every_cf_code_point() -> None:
    """FORMAT_CHARACTERS matches every Cf character this Python knows, nothing else."""
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if unicodedata.category(ch) == "Cf":
            assert FORMAT_CHARACTERS.fullmatch(ch), hex(code)
    assert FORMAT_CHARACTERS.search("plain ascii, tabs\tand é") is None
