"""Differential enforcement, core alone: no hostile spelling of a mutation on a child
gets past :class:`~acp_proxy.core.engine.ProxyCore` in a form an SDK would dispatch.

The spellings come from ``tests/support/mutations.py``. For each one, what the
core forwards to the agent is read the way each official SDK reads it
(:func:`~support.mutations.python_sdk_dispatch`, the real Python SDK router and
pydantic models with the ``_meta`` spread; :func:`~support.mutations.js_sdk_dispatch`,
the TypeScript SDK's ``JSON.parse`` reading): neither may dispatch a mutation
for ``CHILD``. A client line that is not strict UTF-8 is refused outright
(-32700 for a request-shaped line, nothing forwarded). Controls (the same
calls on ``PARENT`` or on a child whose capabilities grant them) must be
forwarded, so the checks can fail.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.corekit import AGENT, CLIENT, announce, assert_accounting, open_session, sends
from support.mutations import (
    CHILD,
    GRANTED,
    ID_KINDS,
    METHODS,
    PARENT,
    VARIANTS,
    WRAPS,
    Spelling,
    controls,
    js_sdk_dispatch,
    python_sdk_dispatch,
    spell,
    spellings,
    strict_utf8,
    violations,
)

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.actions import Action
from acp_proxy.core.engine import ProxyCore

#: the grants the controls rely on, written as a user would (merged over the defaults)
GRANTS = {"session/cancel": "cancel", "session/prompt": "prompt"}


#: limits that send every frame longer than 64 bytes through the large-frame view
#: (``acp_proxy.core.wire.views``), never refusing one as too dense
VIEW_LIMITS = {"dense_message_bytes": 64, "min_bytes_per_value": 1}


def make_core(view: bool = False) -> ProxyCore:
    """A core that knows ``PARENT`` and its children ``CHILD`` (no capabilities) and
    ``GRANTED`` (``cancel`` and ``prompt``); with ``view``, frames over 64 bytes are
    read through the large-frame view."""
    data: dict[str, object] = {"enforcement": {"child_mutations": GRANTS}}
    if view:
        data["limits"] = VIEW_LIMITS
    core = ProxyCore(config_from_dict(data))
    open_session(core, PARENT)
    core.receive(AGENT, announce(PARENT, CHILD, title="no grants"), 0.0)
    caps = {"cancel": {}, "prompt": {}}
    core.receive(AGENT, announce(PARENT, GRANTED, title="granted", capabilities=caps), 0.0)
    assert {CHILD, GRANTED} <= set(core.registry.children)
    return core


def forwarded_lines(actions: list[Action]) -> list[bytes]:
    """Every message sent to the agent, one line each (runs split)."""
    return [line for data in sends(actions, AGENT) for line in data.split(b"\n")]


def check(line: bytes, view: bool = False) -> list[str]:
    """Problems with the core's verdict on one client ``line`` (empty: it held)."""
    core = make_core(view)
    actions = core.receive(CLIENT, line, 1.0)
    problems = [p for out in forwarded_lines(actions) for p in violations(out)]
    if not strict_utf8(line):
        if forwarded_lines(actions):
            problems.append("a line that is not UTF-8 was forwarded")
        answers = [json.loads(a) for a in sends(actions, CLIENT)]
        if b'"id"' in line and not any(a.get("error", {}).get("code") == -32700 for a in answers):
            problems.append(f"a line that is not UTF-8 was not answered -32700: {answers}")
    assert_accounting(core)
    return problems


ALL = spellings()


def test_generator_spells_child_mutations_every_sdk_would_dispatch() -> None:
    """The generator is not vacuous: sent straight to an agent (no proxy), most
    spellings would run a mutation on CHILD in at least one SDK, the ``_meta``
    carriers in the Python SDK only."""
    dangerous = [sp for sp in ALL if violations(sp.line)]
    assert len(dangerous) > len(ALL) // 2
    meta = [sp for sp in ALL if sp.label == "session/prompt meta-session_id"]
    expected = f"python SDK dispatches session/prompt for CHILD (case {meta[0].case})"
    assert violations(meta[0].line) == [expected]


@pytest.mark.parametrize("view", [False, True], ids=["whole", "view"])
@pytest.mark.parametrize("spelling", ALL, ids=lambda sp: sp.label)
def test_no_generated_spelling_reaches_a_child_handler(spelling: Spelling, view: bool) -> None:
    """Every deterministic spelling: what the core forwards runs nothing on CHILD, whether
    the frame is decoded whole or read through the large-frame view."""
    assert check(spelling.line, view) == [], spelling.line


@pytest.mark.parametrize("view", [False, True], ids=["whole", "view"])
@pytest.mark.parametrize(("spelling", "sid"), controls(1), ids=lambda x: getattr(x, "label", ""))
def test_controls_are_forwarded(spelling: Spelling, sid: str, view: bool) -> None:
    """The same calls on PARENT, or on a child that grants them, reach the agent unchanged."""
    core = make_core(view)
    actions = core.receive(CLIENT, spelling.line, 1.0)
    assert forwarded_lines(actions) == [spelling.line]
    assert {d[1] for d in js_sdk_dispatch(spelling.line)} == {sid}
    if spelling.method != "session/inject":  # the Python SDK has no route for it
        assert {d[1] for d in python_sdk_dispatch(spelling.line)} == {sid}


_WS = st.sampled_from([b"", b" ", b"\t", b"\r", b" \t\r\n"[:3]])


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    """A random method x variant x id kind x wrap x whitespace, sometimes with
    extra bytes spliced in (a ``\\xed\\xa0\\x80`` or an overlong sequence)."""
    method = draw(st.sampled_from([*METHODS, "session/status", "session/delete"]))
    variant = draw(st.sampled_from(sorted(VARIANTS)))
    id_kind = draw(st.sampled_from(sorted(ID_KINDS)))
    wrap = draw(st.sampled_from(WRAPS))
    ws = draw(_WS)
    case = draw(st.integers(min_value=1, max_value=10**6))
    line = spell(method, variant, case, id_kind=id_kind, wrap=wrap, ws=ws)
    if method == "session/status" and wrap == "none":
        # read-only on a child: forwarded when clean; made hostile by a twin
        line = line.replace(b'"session/status"', b'"session/status","method":"session/close"', 1)
    if draw(st.booleans()):
        junk = draw(st.sampled_from([b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\xf4\x90\x80\x80"]))
        quote = [i for i, c in enumerate(line) if c == ord('"')]
        at = draw(st.sampled_from(quote)) + 1
        line = line[:at] + junk + line[at:]
    return line


@settings(max_examples=1500, derandomize=True)  # high volume, the same examples every run
@given(hostile_lines(), st.booleans())
def test_random_spellings_never_reach_a_child_handler(line: bytes, view: bool) -> None:
    """High-volume mix of the generator's ideas: the same properties hold, decoded whole
    or through the large-frame view."""
    assert check(line, view) == [], line
