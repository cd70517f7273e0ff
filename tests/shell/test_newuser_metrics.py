"""Issue 32: what ``--metrics`` tells a new user (the exact sentences)."""

from __future__ import annotations

import io
import json
import re

import pytest
import trio
from support.corekit import CLIENT, req

from acp_proxy.config import Config
from acp_proxy.errors import UsageError
from acp_proxy.shell.metrics import serve_metrics, status
from acp_proxy.shell.observe import Hub, Tally
from acp_proxy.shell.timefmt import iso_utc
from acp_proxy.shell.trace import TraceWriter


async def test_a_non_loopback_address_suggests_what_works_in_every_form() -> None:
    with pytest.raises(UsageError) as err:
        await serve_metrics("0.0.0.0:0", Hub(tally=Tally()), Config())
    assert str(err.value) == (
        "--metrics 0.0.0.0:0 is not a loopback address: set token_file in the [listen] table "
        "of the --config file (or pass --token-file with --listen or --connect) so that "
        "requests need a bearer token, or use 127.0.0.1"
    )


async def test_serving_prints_where(capsys: pytest.CaptureFixture[str]) -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1:0", Hub(tally=Tally()), Config())
        nursery.cancel_scope.cancel()
    assert capsys.readouterr().err == (
        f"acp-proxy: serving metrics on http://127.0.0.1:{port}/metrics "
        "(also /healthz, /readyz, /status)\n"
    )


ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def test_status_times_are_iso_utc_and_a_refused_prompt_reads_alike() -> None:
    """`started` in /status is ISO 8601 UTC with Z (as in the audit and the trace header);
    one refused prompt is `answered: 1` among the connection's counters (the proxy answered
    it) and `refused: 1`, `answered: 0` among the decisions (README "Metrics and status")."""
    hub = Hub(tally=Tally())
    core = hub.make_core(Config())
    core.receive(CLIENT, req(1, "session/prompt", {"sessionId": 5, "prompt": []}), 1.0)
    got = status(hub)
    assert ISO_UTC.fullmatch(got["started"])
    assert ISO_UTC.fullmatch(got["connections"][0]["started"])
    assert got["connections"][0]["counters"]["answered"] == 1
    assert got["decisions"]["refused"] == 1
    assert got["decisions"]["answered"] == 0


def test_the_trace_header_time_is_iso_utc() -> None:
    stream = io.BytesIO()
    TraceWriter(stream, include_content=False)
    head = json.loads(stream.getvalue().splitlines()[0])
    assert ISO_UTC.fullmatch(head["started"])


def test_iso_utc_is_the_audit_format() -> None:
    assert iso_utc(0.25) == "1970-01-01T00:00:00.250000Z"
