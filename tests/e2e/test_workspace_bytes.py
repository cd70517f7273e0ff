"""Client-given workspaces are bounded in bytes (issue 31, item 5): a process test.

120 ``session/new`` requests carrying 900 KiB of ``additionalDirectories``
each kept the proxy at 140 MiB (from 32) when workspaces were bounded by count
only. With ``limits.max_workspace_bytes`` (8 MiB by default) the ones beyond it
are refused with an error under their id, and the proxy's peak RSS (``VmHWM``)
stays near its start.
"""

from __future__ import annotations

import json

import trio
from support.e2ekit import bridged_proxy, handshake_v1, req

from e2e.test_faults import MIB, _vm_hwm_bytes

TIMEOUT = 120
SESSIONS = 120


def _directories(i: int) -> list[str]:
    """About 900 KiB of absolute directory names."""
    return [f"/ws/{i}/{'d' * 90}{n:06d}" for n in range(9000)]


async def test_120_large_workspaces_are_bounded_in_bytes() -> None:
    """Beyond limits.max_workspace_bytes session/new is refused under its id; VmHWM stays low."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await handshake_v1(proxy, agent)
            start = _vm_hwm_bytes(proxy.process.pid)
            forwarded = 0

            async def answer_agent() -> None:
                nonlocal forwarded
                while True:
                    m = await agent.recv_json()
                    forwarded += 1
                    result = {"sessionId": f"S-{m['id']}"}
                    await agent.send(
                        json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}).encode()
                        + b"\n"
                    )

            answers = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_agent)
                for i in range(SESSIONS):
                    params = {
                        "cwd": f"/ws/{i}",
                        "mcpServers": [],
                        "additionalDirectories": _directories(i),
                    }
                    line = req(100 + i, "session/new", params)
                    assert len(line) > 850 * 1024
                    await proxy.send(line)
                    answers.append(await proxy.out.recv_json())
                nursery.cancel_scope.cancel()
            peak = _vm_hwm_bytes(proxy.process.pid)
    assert [a["id"] for a in answers] == [100 + i for i in range(SESSIONS)]
    accepted = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert 1 <= len(accepted) < 20
    assert forwarded == len(accepted)
    assert len(refused) == SESSIONS - len(accepted)
    assert all("limits.max_workspace_bytes" in a["error"]["message"] for a in refused)
    # 120 x 900 KiB of directories is over 100 MiB of JSON; the proxy keeps at most 8 MiB
    assert peak - start < 48 * MIB, (start // MIB, peak // MIB)
