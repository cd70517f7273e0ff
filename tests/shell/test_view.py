"""``acp-proxy view`` without a browser: the page's data element, its size, the reader of a
growing trace, the loopback server's answers and rules, the conductor export, usage errors."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import h11
import pytest
import trio

from acp_proxy.errors import UsageError
from acp_proxy.shell.view import run_view
from acp_proxy.shell.view.conductor import to_conductor
from acp_proxy.shell.view.page import embed_json, read_records, render_page
from acp_proxy.shell.view.server import respond, serve_view

HEADER = {"type": "header", "format": "acp-proxy-trace", "version": 1, "content": True}


def msg(seq: int | None, **fields: Any) -> dict[str, Any]:
    rec = {
        "type": "message",
        "seq": seq,
        "t": 10.0 + (seq or 0),
        "dir": "client->agent",
        "kind": "request",
        "id": seq,
        "method": "session/prompt",
        "session": "S",
        "size": 50,
        "decision": "forwarded",
        "conn": 1,
    }
    rec.update(fields)
    return rec


def write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    return path


def data_element(page: bytes) -> bytes:
    m = re.search(rb'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S)
    assert m
    return m.group(1)


def test_data_element_escapes_markup_and_line_separators() -> None:
    """``<``, ``>``, ``&``, U+2028 and U+2029 never appear raw; the JSON means the same."""
    value = {"x": "</script><!-- & \u2028\u2029 -->"}
    line = json.dumps(value, ensure_ascii=False).encode()
    out = embed_json([line])
    for raw in (b"<", b">", b"&", "\u2028".encode(), "\u2029".encode()):
        assert raw not in out
    assert json.loads(out) == [value]


def test_page_is_self_contained_with_a_policy(tmp_path: Path) -> None:
    """Style and script are inside; the policy allows them by hash and no request;
    nothing names another origin."""
    trace = write(tmp_path / "t.jsonl", [HEADER, msg(1, method="</script><b>")])
    page = render_page(read_records(str(trace)), title="<t>")
    text = page.decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text)
    assert policy
    assert "default-src 'none'" in policy.group(1)
    assert "connect-src 'none'" in policy.group(1)
    assert len(re.findall(r"'sha256-[A-Za-z0-9+/=]+'", policy.group(1))) == 2
    assert not re.search(r"(src|href)=\"https?:", text)
    assert "innerHTML" not in text
    assert text.count("</script>") == 3  # config, data, the script itself
    assert json.loads(data_element(page))[1]["method"] == "</script><b>"


def test_page_of_a_trace_without_content_is_about_its_size(tmp_path: Path) -> None:
    """The HTML of a 20,000-message trace without content stays under 1.1x its size
    plus the page's code."""
    recs = [{**HEADER, "content": False}] + [msg(i) for i in range(1, 20_001)]
    trace = write(tmp_path / "t.jsonl", recs)
    empty = len(render_page(read_records(str(write(tmp_path / "e.jsonl", [HEADER]))), title="t"))
    page = render_page(read_records(str(trace)), title="t")
    assert len(page) - empty <= 1.1 * trace.stat().st_size


def test_reader_leaves_a_half_written_line_for_later(tmp_path: Path) -> None:
    """A last line without its newline is not read; the next read from the offset gets it
    whole. A line that is not a JSON object is counted and skipped."""
    trace = tmp_path / "t.jsonl"
    whole = json.dumps(msg(1)) + "\n"
    trace.write_text(json.dumps(HEADER) + "\nnot json\n[1]\n" + whole + whole[:10])
    first = read_records(str(trace))
    assert len(first.lines) == 2
    assert first.unreadable == 2
    with open(trace, "a") as f:
        f.write(whole[10:])
    second = read_records(str(trace), first.offset)
    assert [json.loads(x) for x in second.lines] == [msg(1)]
    assert second.offset == trace.stat().st_size


def test_records_endpoint_answers_from_an_offset(tmp_path: Path) -> None:
    """``/records?offset=N`` returns the records after N and the new offset; a bad offset
    is a 400, an offset past the end of a truncated trace a 409."""
    trace = write(tmp_path / "t.jsonl", [HEADER, msg(1)])
    code, ctype, body = respond(str(trace), "/records?offset=0")
    assert (code, ctype) == (200, "application/json")
    answer = json.loads(body)
    assert [r["type"] for r in answer["records"]] == ["header", "message"]
    assert answer["offset"] == trace.stat().st_size
    code, _, body = respond(str(trace), f"/records?offset={answer['offset']}")
    assert json.loads(body)["records"] == []
    assert respond(str(trace), "/records?offset=x")[0] == 400
    assert respond(str(trace), "/records?offset=999999")[0] == 409
    assert respond(str(trace), "/other")[0] == 404
    code, ctype, page = respond(str(trace), "/")
    assert code == 200
    assert "connect-src 'self'" in page.decode()


async def _get(port: int, target: str, headers: list[tuple[str, str]]) -> int:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h11.Connection(h11.CLIENT)
    await stream.send_all(
        conn.send(h11.Request(method="GET", target=target, headers=headers))
        + conn.send(h11.EndOfMessage())
    )
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Response):
            await stream.aclose()
            return event.status_code


async def test_server_is_loopback_and_refuses_other_hosts_and_origins(tmp_path: Path) -> None:
    """The page is served on 127.0.0.1; a request naming another Host (DNS rebinding) or
    coming from another page's origin is refused."""
    trace = write(tmp_path / "t.jsonl", [HEADER, msg(1)])
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_view, str(trace))
            assert url.startswith("http://127.0.0.1:")
            port = int(url.rsplit(":", 1)[1].rstrip("/"))
            here = f"127.0.0.1:{port}"
            assert await _get(port, "/", [("host", here)]) == 200
            assert await _get(port, "/records?offset=0", [("host", f"localhost:{port}")]) == 200
            assert await _get(port, "/", [("host", f"evil.example:{port}")]) == 421
            origin = [("host", here), ("origin", "http://evil.example")]
            assert await _get(port, "/records?offset=0", origin) == 403
            same = [("host", here), ("origin", f"http://{here}")]
            assert await _get(port, "/records?offset=0", same) == 200
            nursery.cancel_scope.cancel()


def test_conductor_events_for_each_decision() -> None:
    """Forwarded: into and out of the proxy; refused: in, and the proxy's error response;
    held then released: in, and out at the release; dropped: in only; the unreadable
    kinds are counted, not drawn."""
    recs = [
        HEADER,
        msg(1, content='{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"a":1}}'),
        msg(2, decision="refused"),
        msg(
            3,
            dir="agent->client",
            kind="notification",
            id=None,
            method="session/update",
            decision="held",
        ),
        msg(
            4,
            dir="agent->client",
            kind="notification",
            id=None,
            method="session/update",
            decision="dropped",
        ),
        msg(
            None,
            of=3,
            dir="agent->client",
            kind="notification",
            id=None,
            method="session/update",
            decision="released",
            t=20.0,
        ),
        msg(5, dir="agent->client", kind="error", id=1, method=None, session=None),
        msg(6, kind="invalid", id=None, method=None, session=None, decision="refused"),
        {"type": "closed", "t": 30.0, "peer": "client", "conn": 1},
    ]
    skipped: Counter[str] = Counter()
    events = list(to_conductor(recs, 1, skipped))
    got = [(e["type"], e["from"], e["to"], e.get("id"), e["ts"]) for e in events]
    assert got == [
        ("request", "Client", "Proxy(0)", 1, 0.0),
        ("request", "Proxy(0)", "Agent", 1, 0.0),
        ("request", "Client", "Proxy(0)", 2, 1.0),
        ("response", "Proxy(0)", "Client", 2, 1.0),
        ("notification", "Agent", "Proxy(0)", None, 2.0),
        ("notification", "Agent", "Proxy(0)", None, 3.0),
        ("notification", "Proxy(0)", "Client", None, 9.0),
        ("response", "Agent", "Proxy(0)", 1, 4.0),
        ("response", "Proxy(0)", "Client", 1, 4.0),
    ]
    assert events[0]["params"] == {"a": 1}
    assert events[0]["session"] == "S"
    assert events[2]["params"] is None
    assert events[3]["is_error"] is True
    assert events[7]["is_error"] is True
    assert "id" not in events[4]
    assert skipped == Counter({"invalid": 1})


def test_conductor_export_of_a_trace_with_connections_needs_one(tmp_path: Path) -> None:
    """Two connections: ``--conn`` picks one (a conductor trace is one connection)."""
    trace = write(tmp_path / "t.jsonl", [HEADER, msg(1), msg(1, conn=2, id=7)])
    out = tmp_path / "c.jsons"
    with pytest.raises(UsageError, match="--conn N"):
        run_view([str(trace), "--format", "conductor", "-o", str(out)])
    assert run_view([str(trace), "--format", "conductor", "-o", str(out), "--conn", "2"]) == 0
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [7, 7]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl", "-o", "x.html"], "cannot read the trace"),
        (["NOTTRACE", "-o", "x.html"], "is not an acp-proxy trace"),
        (["TRACE", "--format", "conductor"], "add -o FILE"),
        (["TRACE", "--conn", "1", "-o", "x.html"], "--conn is for --format conductor"),
        (["TRACE", "--format", "svg"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_with_one_sentence(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Each mistake is one line on stderr saying what to do, exit status 2."""
    trace = write(tmp_path / "t.jsonl", [HEADER])
    (tmp_path / "n.txt").write_text("hello\n")
    args = [{"TRACE": str(trace), "NOTTRACE": str(tmp_path / "n.txt")}.get(a, a) for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "acp_proxy", "view", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    """``--port`` naming a port another program holds: exit 2, one sentence."""
    trace = write(tmp_path / "t.jsonl", [HEADER])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "acp_proxy", "view", str(trace), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert "cannot serve the page" in done.stderr
    assert "--port" in done.stderr


def test_a_page_or_export_written_to_a_file_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o FILE`` names the file it wrote on stderr; ``-o -`` writes only the file."""
    trace = write(tmp_path / "t.jsonl", [HEADER, msg(1)])
    page = tmp_path / "p.html"
    assert run_view([str(trace), "-o", str(page)]) == 0
    err = capsys.readouterr().err
    assert err == f"acp-proxy view: wrote the trace's page to {page}\n"
    assert page.read_bytes().startswith(b"<!")
    out = tmp_path / "c.jsons"
    assert run_view([str(trace), "--format", "conductor", "-o", str(out)]) == 0
    n = len(out.read_text().splitlines())
    assert capsys.readouterr().err == f"acp-proxy view: wrote {n} conductor events to {out}\n"
    assert run_view([str(trace), "--format", "conductor", "-o", "-"]) == 0
    assert capsys.readouterr().err == ""
