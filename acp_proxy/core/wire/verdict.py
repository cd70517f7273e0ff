"""What the wire concludes about one frame: its kind, its facts, its verdict.

docs/design.md section 2 ("The wire: one pipeline"). :func:`~acp_proxy.core.wire.jsonrpc.parse`
is three steps: the decoders (:mod:`~acp_proxy.core.wire.decode`) report
:class:`Facts`, the classifier (:mod:`~acp_proxy.core.wire.shape`) reads the
JSON-RPC :class:`Shape`, and the ordered check table
(:mod:`~acp_proxy.core.wire.checks`) gives the first failing row's
:class:`Verdict`. The engine refuses a frame by its verdict from one table
(:mod:`~acp_proxy.core.engine.refusals`).
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["Facts", "Faults", "Flawed", "Kind", "Shape", "Verdict"]


class Kind(enum.Enum):
    """What a frame is, by JSON-RPC 2.0 section 4-6."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    ERROR_RESPONSE = "error_response"
    BATCH = "batch"
    INVALID = "invalid"


class Verdict(enum.IntEnum):
    """The verdict on one frame, in precedence order: when a frame has several faults,
    the first member that applies is its verdict (a lower value wins).

    ``OVERSIZE`` is the framer's (the frame was never read); the others are
    :func:`~acp_proxy.core.wire.jsonrpc.parse`'s. Only ``OK`` is handed to the
    engine's directions; every other verdict is refused by its row of
    :data:`~acp_proxy.core.engine.refusals.REFUSALS`.
    """

    #: longer than ``limits.max_message_bytes``: skipped by the framer, never decoded
    OVERSIZE = 0
    #: objects and arrays nest deeper than ``limits.max_nesting_depth``
    TOO_DEEP = 1
    #: not one JSON text in strict UTF-8 (JSON-RPC ``-32700``)
    NOT_JSON = 2
    #: JSON holding an integer of more than 4300 digits (peers read it differently)
    LONG_INTEGER = 3
    #: too many JSON values per byte to inspect within the memory bound
    TOO_DENSE = 4
    #: JSON, but not a JSON-RPC 2.0 message (or an id the proxy cannot track)
    INVALID = 5
    #: a JSON-RPC batch: ACP uses none, refused whole
    BATCH = 6
    #: a session id that is not a string or is over ``limits.max_session_id_bytes``
    BAD_SESSION_ID = 7
    #: a decision field a peer could read differently (a repeated or misread key)
    AMBIGUOUS = 8
    #: nothing wrong: decided by the engine's directions
    OK = 9


class _NoFaults:
    """Defaults of :class:`Facts` and :class:`Shape`: nothing found (class attributes, so
    the common frame, with nothing wrong, costs two slots)."""

    __slots__ = ()
    too_deep: bool = False
    not_json: str | None = None
    long_integer: bool = False
    too_dense: bool = False
    repeated: str | None = None
    unreadable: str | None = None
    elements: int | None = None
    spans: list[tuple[int, int]] | None = None
    invalid: str | None = None
    misread: str | None = None
    malformed_error: bool = False
    faulty: bool = False


class Facts(_NoFaults):
    """What the decoders found in one frame's bytes (no judgement); nothing wrong here
    (:class:`Faults` when something is).

    Attributes:
        body: the decoded value: a ``dict`` (a strict-path object in which a
            key repeats is the guard's dict subclass with ``dups``), a view of
            a large frame, or ``None`` when it was not decoded.
        canonical: the frame is exactly the compact encoding of ``body``.
        too_deep: objects and arrays nest deeper than the limit.
        not_json: why the bytes are not JSON (not strict UTF-8, a syntax
            error), else ``None``.
        long_integer: an integer of more than 4300 digits.
        too_dense: too many JSON values per byte.
        repeated: why a decision key repeats at its level, else ``None``.
        unreadable: why a decision value cannot be read as every peer reads
            it (a lone surrogate escape, a ``_meta`` too large to check), else ``None``.
        elements: how many elements a batch holds (``None``: not a batch).
        spans: the ``(start, end)`` byte spans of a batch's elements that may
            be requests.
        faulty: any of ``too_deep``, ``not_json``, ``long_integer``,
            ``too_dense``, ``repeated``, ``unreadable`` is set.
    """

    __slots__ = ("body", "canonical")

    def __init__(self, body: Any = None, canonical: bool = False) -> None:
        self.body = body
        self.canonical = canonical


class Faults(Facts):
    """:class:`Facts` of a frame with something found: a fault, or a batch."""

    __slots__ = (
        "elements",
        "faulty",
        "long_integer",
        "not_json",
        "repeated",
        "spans",
        "too_deep",
        "too_dense",
        "unreadable",
    )

    def __init__(
        self,
        body: Any = None,
        *,
        too_deep: bool = False,
        not_json: str | None = None,
        long_integer: bool = False,
        too_dense: bool = False,
        repeated: str | None = None,
        unreadable: str | None = None,
        elements: int | None = None,
        spans: list[tuple[int, int]] | None = None,
    ) -> None:
        super().__init__(body)
        self.too_deep = too_deep
        self.not_json = not_json
        self.long_integer = long_integer
        self.too_dense = too_dense
        self.repeated = repeated
        self.unreadable = unreadable
        self.elements = elements
        self.spans = spans
        self.faulty = (
            too_deep
            or long_integer
            or too_dense
            or not_json is not None
            or repeated is not None
            or unreadable is not None
        )


class Shape(_NoFaults):
    """The JSON-RPC shape of a decoded frame (:func:`~acp_proxy.core.wire.shape.classify`):
    a plain request, notification or response (:class:`Flawed` otherwise).

    Attributes:
        kind: the :class:`Kind` the members say.
        id: the id when the proxy tracks it (``str``, or ``int`` with
            ``|id| < 2**53``), else ``None``.
        method: the method of a request or notification.
        params: ``params`` when it is an object.
        invalid: why it is not a JSON-RPC message, else ``None``.
        misread: why an SDK could read ``params`` of a non-extension method
            otherwise (a snake_case or ``_meta`` spelling), else ``None``.
        malformed_error: an error response whose ``error`` lacks an integer
            ``code`` or a string ``message`` (forwarded, counted).
        faulty: ``invalid`` or ``misread`` is set, or it is a batch.
    """

    __slots__ = ("id", "kind", "method", "params")

    def __init__(
        self,
        kind: Kind,
        id: str | int | None = None,
        method: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.id = id
        self.method = method
        self.params = params


class Flawed(Shape):
    """A :class:`Shape` that is invalid, misread, a batch or a malformed error response."""

    __slots__ = ("faulty", "invalid", "malformed_error", "misread")

    def __init__(
        self,
        kind: Kind,
        id: str | int | None = None,
        method: str | None = None,
        params: dict[str, Any] | None = None,
        invalid: str | None = None,
        misread: str | None = None,
        malformed_error: bool = False,
    ) -> None:
        super().__init__(kind, id, method, params)
        self.invalid = invalid
        self.misread = misread
        self.malformed_error = malformed_error
        self.faulty = invalid is not None or misread is not None or kind is Kind.BATCH
