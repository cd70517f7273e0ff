"""The JSON-RPC 2.0 shape of a decoded frame (docs/protocol.md section 1).

:func:`classify` reads the members of a decoded value and says what kind of
message it is (request, notification, response, error response, batch or
invalid, and why), and whether an SDK could read its ``params`` otherwise
(:func:`~acp_proxy.core.wire.guard.misread`). It judges nothing else: the
check table (:mod:`~acp_proxy.core.wire.checks`) orders the faults.
"""

from __future__ import annotations

from typing import Any

from acp_proxy.core.wire import reasons
from acp_proxy.core.wire.guard import misread
from acp_proxy.core.wire.verdict import Flawed, Kind, Shape

__all__ = ["SAFE_INT", "classify"]

#: An integer id must be one a JavaScript peer reads exactly (``|id| < 2**53``): two
#: ids it would read as one could end the wrong request in flight.
SAFE_INT = 2**53

_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION
_RESPONSE = Kind.RESPONSE
_ERROR_RESPONSE = Kind.ERROR_RESPONSE
_BATCH = Kind.BATCH
_INVALID = Kind.INVALID
_PARAMS_TYPES = (dict, list)
_MISSING: Any = object()


def classify(body: Any, elements: int | None = None) -> Shape:
    """The JSON-RPC shape of the decoded value ``body``.

    Args:
        body: the decoded JSON value (a ``dict`` or a view for an object).
        elements: how many elements a batch holds, when the frame is one
            (its elements are never decoded here).

    Returns:
        A :class:`~acp_proxy.core.wire.verdict.Shape`; never raises.
    """
    if elements is not None:
        return Flawed(_INVALID, invalid=reasons.EMPTY_BATCH) if elements == 0 else Flawed(_BATCH)
    if not isinstance(body, dict):
        return Flawed(_INVALID, invalid=reasons.NOT_AN_OBJECT)
    rid = body.get("id", _MISSING)
    t = type(rid)
    rid_ok = t is str or (t is int and -SAFE_INT < rid < SAFE_INT)
    method = body.get("method", _MISSING)
    if (
        body.get("jsonrpc") == "2.0"
        and type(method) is str
        and "result" not in body
        and "error" not in body
    ):
        # The common shapes: a request or a notification.
        params = body.get("params")
        if params is None or type(params) is dict:
            return _call(rid, rid_ok, method, params)
    return _classify_slow(body, rid, rid_ok)


def _call(rid: Any, rid_ok: bool, method: str, params: dict[str, Any] | None) -> Shape:
    """A request or a notification (``params``: an object, or ``None``); :class:`Flawed`
    when its id is one the proxy does not track, or an SDK could misread its params."""
    why = misread(method, params) if params is not None and method[:1] != "_" else None
    if rid is _MISSING:
        kind, tracked = _NOTIFICATION, None
    elif rid_ok:
        kind, tracked = _REQUEST, rid
    else:
        return Flawed(_INVALID, None, method, params, reasons.ID_REASON, why)
    if why is None:
        return Shape(kind, tracked, method, params)
    return Flawed(kind, tracked, method, params, misread=why)


def _classify_slow(body: dict[str, Any], rid: Any, rid_ok: bool) -> Shape:
    sid = rid if rid_ok else None
    if body.get("jsonrpc") != "2.0":
        return Flawed(_INVALID, sid, invalid=reasons.NO_JSONRPC)
    method = body.get("method", _MISSING)
    if method is not _MISSING:
        if type(method) is not str:
            return Flawed(_INVALID, sid, invalid=reasons.METHOD_NOT_STRING)
        if "result" in body or "error" in body:
            return Flawed(_INVALID, sid, invalid=reasons.REQUEST_WITH_RESULT)
        params = body.get("params")
        if params is not None and not isinstance(params, _PARAMS_TYPES):
            return Flawed(_INVALID, sid, invalid=reasons.PARAMS_TYPE)
        return _call(rid, rid_ok, method, params if isinstance(params, dict) else None)
    if rid is _MISSING:
        return Flawed(_INVALID, invalid=reasons.NO_KIND)
    has_result = "result" in body
    if has_result == ("error" in body):
        return Flawed(_INVALID, sid, invalid=reasons.RESULT_XOR_ERROR)
    if has_result:
        if not rid_ok:
            return Flawed(_INVALID, invalid=reasons.ID_REASON)
        return Shape(_RESPONSE, rid)
    if rid is not None and not rid_ok:
        return Flawed(_INVALID, invalid=reasons.ERROR_ID_REASON)
    err = body["error"]
    malformed = not (
        isinstance(err, dict) and type(err.get("code")) is int and type(err.get("message")) is str
    )
    return (
        Flawed(_ERROR_RESPONSE, rid, malformed_error=True)
        if malformed
        else Shape(_ERROR_RESPONSE, rid)
    )
