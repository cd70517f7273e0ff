"""The check table of the wire: each row fires alone on its frame, and the first failing
row is the verdict (docs/design.md section 2, "The wire: one pipeline")."""

from __future__ import annotations

import pytest

from acp_proxy.core.wire.checks import CHECKS, Check, Limits
from acp_proxy.core.wire.decode import decode
from acp_proxy.core.wire.jsonrpc import Kind, Verdict, parse
from acp_proxy.core.wire.reasons import REPEATED_KEY, SNAKE_CASE_REASON
from acp_proxy.core.wire.shape import classify
from acp_proxy.core.wire.verdict import Shape

DENSE_BYTES = 1024
LIMITS = Limits(DENSE_BYTES, 48, 64, 1024)

_KEYS = b",".join(b'"k%d":1' % i for i in range(2000))
#: One frame per row of CHECKS that fails that row and no other.
FRAMES: dict[str, bytes] = {
    "nesting": b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":'
    + b"[" * 70
    + b"]" * 70
    + b"}}",
    "json": b'{"jsonrpc":"2.0","id":1,"method":',
    "long integer": b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":' + b"7" * 4400 + b"}}",
    # not compact and "method" written twice (the view checks the level), one value / 9 bytes
    "density": (
        b'{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", '
        b'"params": {"sessionId": "S", "a": "method", ' + _KEYS + b"}}"
    ),
    "shape": b'{"jsonrpc":"1.0","id":1,"method":"m"}',
    "batch": b'[{"jsonrpc":"2.0","id":1,"method":"m"}]',
    "session id": b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":5}}',
    "repeated": b'{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}',
    "unreadable": (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"\\ud800",'
        b'"update":{"sessionUpdate":"agent_message_chunk"}}}'
    ),
    "misread": b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"session_id":"S"}}',
}
#: The row each frame is for (by position in CHECKS).
ROW_OF = {name: i for i, name in enumerate(FRAMES)}


def failing_rows(raw: bytes) -> list[Check]:
    """Every row of CHECKS that fails on ``raw`` (not only the first), read as parse reads."""
    facts = decode(raw, LIMITS.dense_bytes, LIMITS.min_bytes_per_value, LIMITS.max_depth)
    if facts.body is None and facts.faulty:
        shape = Shape(Kind.INVALID)  # not read: no shape
    else:
        shape = classify(facts.body, facts.elements)
    return [row for row in CHECKS if row.test(facts, shape, LIMITS) is not None]


def test_there_is_a_frame_for_every_row() -> None:
    """The table has the rows this suite exercises, in this order."""
    assert len(FRAMES) == len(CHECKS)
    assert len(FRAMES["density"]) > DENSE_BYTES


@pytest.mark.parametrize("name", list(FRAMES))
def test_each_row_fires_on_its_frame_and_only_it(name: str) -> None:
    """The frame made for a row fails that row and no other, and parse gives its verdict."""
    raw = FRAMES[name]
    row = CHECKS[ROW_OF[name]]
    assert failing_rows(raw) == [row]
    m = parse(raw, *LIMITS)
    assert m.verdict is row.verdict
    assert m.reason is not None


def test_a_plain_frame_fails_no_row() -> None:
    """A well-formed request is OK: no reason, its shape kept."""
    raw = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S"}}'
    assert failing_rows(raw) == []
    m = parse(raw, *LIMITS)
    assert (m.verdict, m.reason, m.kind, m.id) == (Verdict.OK, None, Kind.REQUEST, 1)


def test_the_rows_are_in_verdict_order() -> None:
    """The table's order is the precedence the Verdict enum states."""
    verdicts = [row.verdict for row in CHECKS]
    assert verdicts == sorted(verdicts)
    assert set(verdicts) == set(Verdict) - {Verdict.OVERSIZE, Verdict.OK}


# Two faults in one frame: the earlier row's verdict (and reason) wins.
TWO_FAULTS = [
    # nested too deep and cut off: too deep, not "not JSON"
    ("nesting", "json", b'{"jsonrpc":"2.0","id":1,"params":' + b"[" * 200),
    # an invalid jsonrpc and a repeated decision key
    ("shape", "repeated", b'{"jsonrpc":"1.0","id":1,"method":"m","method":"n"}'),
    # a session id that is not a string and a snake_case spelling
    (
        "session id",
        "misread",
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt",'
        b'"params":{"sessionId":5,"session_id":"S"}}',
    ),
    # a repeated decision key and a snake_case spelling
    (
        "repeated",
        "misread",
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt",'
        b'"params":{"sessionId":"S","sessionId":"T","session_id":"S"}}',
    ),
    # an untracked id (2**53) and a snake_case spelling
    (
        "shape",
        "misread",
        b'{"jsonrpc":"2.0","id":9007199254740993,"method":"session/prompt",'
        b'"params":{"session_id":"S"}}',
    ),
    # nested too deep and cut off before any closing bracket: shorter than two bytes a
    # level, still too deep
    ("nesting", "json", b'{"id":1,"params":' + b"[" * 70),
]


@pytest.mark.parametrize(("first", "second", "raw"), TWO_FAULTS)
def test_a_frame_with_two_faults_gets_the_earlier_verdict(
    first: str, second: str, raw: bytes
) -> None:
    """Both rows fail on their own where the bytes can be read; the first is the verdict."""
    earlier, later = CHECKS[ROW_OF[first]], CHECKS[ROW_OF[second]]
    rows = failing_rows(raw)
    assert rows[0] is earlier
    if earlier.reads != "facts":  # a fault of the bytes hides what is behind it
        assert later in rows
    m = parse(raw, *LIMITS)
    assert m.verdict is earlier.verdict
    assert m.reason == earlier.test(*_read(raw))


def _read(raw: bytes) -> tuple[object, object, Limits]:
    facts = decode(raw, LIMITS.dense_bytes, LIMITS.min_bytes_per_value, LIMITS.max_depth)
    if facts.body is None and facts.faulty:
        return facts, Shape(Kind.INVALID), LIMITS
    return facts, classify(facts.body, facts.elements), LIMITS


def test_the_reason_of_two_ambiguities_is_the_earlier_rows() -> None:
    """A repeated key and a snake_case spelling: the repeated key is what the reason says."""
    raw = TWO_FAULTS[3][2]
    m = parse(raw, *LIMITS)
    assert m.verdict is Verdict.AMBIGUOUS
    assert m.reason == REPEATED_KEY != SNAKE_CASE_REASON


def test_the_verdict_is_fixed_when_the_message_is_built() -> None:
    """The flags are read from the verdict the constructor set: none can be set apart."""
    m = parse(FRAMES["misread"], *LIMITS)
    assert m.ambiguous
    assert not m.parse_error
    with pytest.raises(AttributeError):
        m.ambiguous = False  # type: ignore[misc]
    assert parse(FRAMES["json"]).parse_error


@pytest.mark.parametrize(
    "params",
    [
        b'{"sessionId":5,"sessionId":5,"prompt":[]}',
        b'{"sessionId":"' + b"y" * 2000 + b'","_meta":{},"_meta":{}}',
        b'{"sessionId":[],"update":{},"update":{}}',
    ],
    ids=["not a string, repeated", "too long, _meta repeated", "list, update repeated"],
)
def test_a_bad_session_id_and_a_repeated_key_give_one_verdict_on_every_path(
    params: bytes,
) -> None:
    """The earlier verdict (BAD_SESSION_ID) whether the frame is decoded whole or read
    through a view (over limits.dense_message_bytes): the view found the repeated key
    first and kept no params, so a large frame was AMBIGUOUS (-32600, not -32602)."""
    small = b'{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":' + params + b"}"
    large = small[:-2] + b',"t":"' + b"x" * (DENSE_BYTES * 2) + b'"}}'
    for raw in (small, large):
        m = parse(raw, *LIMITS)
        assert (m.verdict, m.id) == (Verdict.BAD_SESSION_ID, 4), (len(raw), m.reason)
    # the repeated id stays unreadable on the view path (answered under null)
    twice = large.replace(b'"id":4,', b'"id":4,"id":5,')
    assert parse(twice, *LIMITS).id is None
