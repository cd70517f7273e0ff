"""``acp-proxy view TRACE -o FILE.html`` in a real headless Chromium, opened from disk.

The page of a real demo run: one element per message record with the
trace's values, the decisions with their audit events, the held message
joined to its release, the session tree, the filters in the URL fragment,
no request to the network and no console error.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from browser.conftest import console_errors, open_page, requests_made
from browser.tracegen import header


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def messages(path: Path) -> list[dict[str, Any]]:
    return [r for r in records(path) if r["type"] == "message"]


def write_page(trace: Path, out: Path) -> str:
    subprocess.run(
        [sys.executable, "-m", "acp_proxy", "view", str(trace), "-o", str(out)],
        check=True,
        timeout=120,
    )
    return out.as_uri()


def one_message_page(tmp_path: Path, name: str, **fields: Any) -> str:
    """The page of a trace (with content) holding one message record with ``fields``."""
    rec = {"type": "message", "seq": 1, "t": 1.0, "size": 10, "conn": 1, "id": None, **fields}
    trace = tmp_path / f"{name}.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in (header(content=True), rec)]
    trace.write_text("".join(lines))
    return write_page(trace, tmp_path / f"{name}.html")


@pytest.fixture(scope="module")
def demo_page(demo_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_page(demo_trace, tmp_path_factory.mktemp("page") / "demo.html")


def rows(driver: webdriver.Chrome, visible_only: bool = False) -> list[dict[str, str]]:
    """Every message row's data attributes (or only the rows not hidden)."""
    return list(
        driver.execute_script(
            """return Array.from(document.querySelectorAll('#timeline .msg'))
                 .filter(r => !arguments[0] || !r.hidden)
                 .map(r => Object.assign({}, r.dataset));""",
            visible_only,
        )
    )


def row_text(driver: webdriver.Chrome, selector: str) -> str:
    """The text of the row matched by ``selector``, scrolled into view (rows near the
    screen carry their text)."""
    text: str = driver.execute_script(
        """const r = document.querySelector(arguments[0]);
           r.scrollIntoView({block: 'center'});
           return new Promise(ok => requestAnimationFrame(() => requestAnimationFrame(
             () => ok(r.textContent))));""",
        selector,
    )
    return text


@pytest.fixture
def page(browser: webdriver.Chrome, demo_page: str) -> Iterator[webdriver.Chrome]:
    open_page(browser, demo_page)
    yield browser
    assert console_errors(browser) == []


def test_opens_from_disk_without_any_request(browser: webdriver.Chrome, demo_page: str) -> None:
    """The page asks for nothing but itself, and its policy refuses a request to loopback."""
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(8)
    trap.setblocking(False)
    try:
        open_page(browser, demo_page)
        assert requests_made(browser) == [demo_page]
        policy = browser.find_element(
            By.CSS_SELECTOR, 'meta[http-equiv="Content-Security-Policy"]'
        ).get_attribute("content")
        assert "default-src 'none'" in (policy or "")
        assert "connect-src 'none'" in (policy or "")
        port = trap.getsockname()[1]
        outcome = browser.execute_async_script(
            """const done = arguments[arguments.length - 1];
               fetch('http://127.0.0.1:' + arguments[0] + '/').then(
                 () => done('fetched'), (e) => done('refused: ' + e));""",
            port,
        )
        assert outcome.startswith("refused")
        with pytest.raises(BlockingIOError):
            trap.accept()  # nothing ever connected
        assert [u for u in requests_made(browser) if not u.startswith("file:")] == []
        errors = console_errors(browser)
        assert errors
        assert all("Content Security Policy" in e["message"] for e in errors)
    finally:
        trap.close()


def test_one_element_per_message_record(page: webdriver.Chrome, demo_trace: Path) -> None:
    """Each message record has its row, in order, with the trace's seq, decision, session."""
    expected = [
        (
            "" if r["seq"] is None else str(r["seq"]),
            r["decision"],
            r["session"] or "",
        )
        for r in messages(demo_trace)
    ]
    got = [(r["seq"], r["decision"], r["session"]) for r in rows(page)]
    assert got == expected
    assert {"held", "released", "refused", "dropped", "answered"} <= {d for _, d, _ in got}


def test_totals_count_each_decision(page: webdriver.Chrome, demo_trace: Path) -> None:
    """The totals at the top count the messages per decision and per session."""
    msgs = messages(demo_trace)
    for decision in {r["decision"] for r in msgs}:
        cell = page.find_element(By.CSS_SELECTOR, f'[data-total-decision="{decision}"] b')
        assert int(cell.text) == sum(r["decision"] == decision for r in msgs)
    main = page.find_element(By.CSS_SELECTOR, '[data-total-session="sess_main"] b')
    assert int(main.text) == sum(
        "sess_main" in (r.get("session"), r.get("for_session")) for r in msgs
    )


def test_refused_and_dropped_show_the_audit_event_and_reason(page: webdriver.Chrome) -> None:
    """A refused request and a dropped notification are marked with event and reason."""
    refused = row_text(page, '.msg[data-decision="refused"][data-session="sess_review"]')
    assert "mutation_rejected" in refused
    assert "not_allowed_on_child" in refused
    dropped = row_text(page, '.msg[data-decision="dropped"]')
    assert "duplicate_dropped" in dropped


def test_held_message_is_joined_to_its_release(page: webdriver.Chrome, demo_trace: Path) -> None:
    """The held update names the message it was released after, and its release row
    (``data-of``) comes right after that message."""
    msgs = messages(demo_trace)
    held = next(r for r in msgs if r["decision"] == "held")
    order = [r["seq"] if r["seq"] is not None else ("of", r["of"]) for r in msgs]
    after = order[order.index(("of", held["seq"])) - 1]
    row = page.find_element(By.CSS_SELECTOR, f'.msg[data-seq="{held["seq"]}"]')
    assert row.get_attribute("data-outcome") == "released"
    assert row.get_attribute("data-after") == str(after)
    assert f"released after #{after}" in row_text(page, f'.msg[data-seq="{held["seq"]}"]')
    release = row_text(page, f'.msg[data-of="{held["seq"]}"]')
    assert f"held at #{held['seq']}" in release


def test_requests_are_joined_to_their_responses(page: webdriver.Chrome) -> None:
    """A request row names its response and the duration; the response names its request."""
    request = page.find_element(By.CSS_SELECTOR, '.msg[data-seq="1"]')
    response_seq = request.get_attribute("data-response")
    assert response_seq == "2"
    assert "response #2 after" in row_text(page, '.msg[data-seq="1"]')
    assert "answers #1 after" in row_text(page, '.msg[data-seq="2"]')


def test_session_tree_shows_children_capabilities_and_freshness(page: webdriver.Chrome) -> None:
    """Top-level session and its children, each child with its last announced
    capabilities, fresh again once re-announced after the resume."""
    top = page.find_element(By.CSS_SELECTOR, '#tree li[data-session="sess_main"]')
    assert top.get_attribute("data-top") is not None
    search = page.find_element(By.CSS_SELECTOR, '#tree li[data-child="sess_search"]')
    assert search.get_attribute("data-parent") == "sess_main"
    assert search.get_attribute("data-caps") == "cancel"
    assert search.get_attribute("data-fresh") == "true"
    review = page.find_element(By.CSS_SELECTOR, '#tree li[data-child="sess_review"]')
    assert review.get_attribute("data-parent") == "sess_main"
    assert review.get_attribute("data-caps") == ""
    assert "Search the docs" in search.text


def test_resume_boundary_is_on_the_timeline(page: webdriver.Chrome, demo_trace: Path) -> None:
    """The parent's resume is marked by a boundary just before its request."""
    resume = next(
        r
        for r in messages(demo_trace)
        if r["method"] == "session/resume" and r["session"] == "sess_main"
    )
    following = page.execute_script(
        """const b = document.querySelector('.boundary[data-boundary="sess_main"]');
           return b && b.nextElementSibling.dataset.seq;"""
    )
    assert following == str(resume["seq"])


def test_session_filter_in_the_fragment_includes_children(
    browser: webdriver.Chrome, demo_page: str, demo_trace: Path
) -> None:
    """``#session=ID`` shows that session's messages and its children's, nothing else."""
    msgs = messages(demo_trace)

    def of(sessions: set[str]) -> list[str]:
        return [
            "" if r["seq"] is None else str(r["seq"])
            for r in msgs
            if (r.get("session") or r.get("for_session")) in sessions
        ]

    open_page(browser, demo_page + "#session=sess_search")
    assert [r["seq"] for r in rows(browser, visible_only=True)] == of({"sess_search"})
    assert browser.find_element(By.ID, "f-session").get_attribute("value") == "sess_search"
    open_page(browser, demo_page + "#session=sess_main")
    assert [r["seq"] for r in rows(browser, visible_only=True)] == of(
        {"sess_main", "sess_search", "sess_review"}
    )
    assert len(of({"sess_main"})) < len(of({"sess_main", "sess_search", "sess_review"}))
    assert console_errors(browser) == []


def test_decision_filter_and_search(browser: webdriver.Chrome, demo_page: str) -> None:
    """``#decision=refused`` shows only refused messages; the search box filters by method
    and id and is kept in the fragment."""
    open_page(browser, demo_page + "#decision=refused")
    shown = rows(browser, visible_only=True)
    assert shown
    assert {r["decision"] for r in shown} == {"refused"}
    open_page(browser, demo_page)
    box = browser.find_element(By.ID, "f-search")
    box.send_keys("perm-fetch")
    shown = rows(browser, visible_only=True)
    assert [r["decision"] for r in shown] == ["answered"]
    assert "q=perm-fetch" in browser.execute_script("return location.hash")
    assert console_errors(browser) == []


def test_trace_data_is_shown_as_text_never_markup(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    """Markup, a closing script tag and U+2028 in a trace's values stay text."""
    hostile = '</script><img src=x onerror="window.pwned=1"><b>bold</b>\u2028&amp;'
    url = one_message_page(
        tmp_path,
        "hostile",
        dir="client->agent",
        kind="request",
        id=hostile,
        method=hostile,
        session=hostile,
        decision="refused",
        events=[{"event": "mutation_rejected", "reason": hostile}],
        content=hostile,
    )
    assert b"</script><img" not in (tmp_path / "hostile.html").read_bytes()
    open_page(browser, url)
    assert browser.execute_script("return window.pwned") is None
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline img, #timeline b") == []
    [row] = rows(browser)
    assert row["session"] == hostile
    assert hostile.replace("\u2028", " ")[:20] in row_text(browser, ".msg").replace("\u2028", " ")
    assert console_errors(browser) == []


def test_rewritten_message_shows_what_was_cut(browser: webdriver.Chrome, tmp_path: Path) -> None:
    """A rewritten state mirror names the state member that was cut, with its value."""
    update = {
        "sessionUpdate": "subagent_update",
        "sessionId": "C",
        "title": "new",
        "state": {"state": "running"},
    }
    content = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "P"}}
    content["params"]["update"] = update  # type: ignore[index]
    url = one_message_page(
        tmp_path,
        "rewritten",
        dir="agent->client",
        kind="notification",
        method="session/update",
        session="P",
        decision="rewritten",
        events=[{"event": "duplicate_dropped", "sessionId": "P", "reason": "repeats the state"}],
        content=json.dumps(content),
    )
    open_page(browser, url)
    text = row_text(browser, '.msg[data-decision="rewritten"]')
    assert 'cut: the state member (repeats the state): "state":{"state":"running"}' in text
    assert console_errors(browser) == []


def test_tree_of_a_trace_without_content_and_cut_mid_resume(
    browser: webdriver.Chrome, demo_trace: Path, tmp_path: Path
) -> None:
    """Without content the grants still show (the records' ``child``); a trace that ends
    between the parent's resume and the re-announcement shows the child not fresh."""
    recs = records(demo_trace)
    resume = next(
        r for r in recs if r.get("method") == "session/resume" and r["decision"] == "forwarded"
    )
    answer = next(r for r in recs if r.get("for_seq") == resume["seq"])
    cut = recs[: recs.index(answer) + 1]
    cut[0] = {**cut[0], "content": False}
    trace = tmp_path / "cut.jsonl"
    trace.write_text(
        "".join(
            json.dumps({k: v for k, v in r.items() if k != "content" or i == 0}) + "\n"
            for i, r in enumerate(cut)
        )
    )
    assert '"content":"' not in trace.read_text().replace(" ", "")
    open_page(browser, write_page(trace, tmp_path / "cut.html"))
    search = browser.find_element(By.CSS_SELECTOR, '#tree li[data-child="sess_search"]')
    assert search.get_attribute("data-caps") == "cancel"
    assert search.get_attribute("data-fresh") == "false"
    assert "not fresh since" in search.text
    assert console_errors(browser) == []


def test_held_message_dropped_on_expiry_says_so(browser: webdriver.Chrome, tmp_path: Path) -> None:
    """A held message whose hold expired (a ``timer`` record, then its ``dropped`` record)
    is marked dropped on expiry, with the audit event of the timer."""
    base = {"type": "message", "dir": "agent->client", "kind": "notification", "id": None}
    base |= {"method": "session/update", "session": "K", "size": 90, "conn": 1}
    recs = [
        header(),
        {
            **base,
            "seq": 1,
            "t": 1.0,
            "decision": "held",
            "events": [{"event": "held", "sessionId": "K", "reason": "not yet known"}],
        },
        {
            "type": "timer",
            "t": 11.0,
            "conn": 1,
            "events": [{"event": "hold_expired", "sessionId": "K", "reason": "10 s passed"}],
        },
        {**base, "seq": None, "of": 1, "t": 11.0, "decision": "dropped"},
    ]
    trace = tmp_path / "expired.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in recs))
    open_page(browser, write_page(trace, tmp_path / "expired.html"))
    held = browser.find_element(By.CSS_SELECTOR, '.msg[data-seq="1"]')
    assert held.get_attribute("data-outcome") == "dropped"
    assert "dropped on expiry of the hold" in row_text(browser, '.msg[data-seq="1"]')
    assert "held at #1 for 10.000 s" in row_text(browser, '.msg[data-of="1"]')
    assert "hold_expired K: 10 s passed" in browser.find_element(By.CSS_SELECTOR, ".ev").text
    assert console_errors(browser) == []
