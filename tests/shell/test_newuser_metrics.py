"""Issue 32: what ``--metrics`` tells a new user (the exact sentences)."""

from __future__ import annotations

import pytest
import trio

from acp_proxy.config import Config
from acp_proxy.errors import UsageError
from acp_proxy.shell.metrics import serve_metrics
from acp_proxy.shell.observe import Hub, Tally


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
