"""``acp-proxy view TRACE`` (served on loopback) follows a trace that grows while the page is open;
the page of a 100,000-message trace renders every row (time to first paint measured)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.support.ui import WebDriverWait

from browser.conftest import console_errors, open_page, requests_made
from browser.test_view_page import messages, rows, write_page
from browser.tracegen import big_trace


@pytest.fixture
def served(demo_trace: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``acp-proxy view`` serving a copy of the demo trace; yields its URL and the copy."""
    trace = tmp_path / "live.jsonl"
    lines = demo_trace.read_text().splitlines(keepends=True)
    trace.write_text("".join(lines[:10]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_proxy", "view", str(trace)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", first)
        assert m, first
        yield m.group(0), trace
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_served_page_follows_a_growing_trace(
    browser: webdriver.Chrome, served: tuple[str, Path], demo_trace: Path
) -> None:
    """Records appended to the trace (a half line included) appear on the open page."""
    url, trace = served
    open_page(browser, url)
    before = len(rows(browser))
    assert before == len(messages(trace))
    rest = demo_trace.read_text().splitlines(keepends=True)[10:]
    with open(trace, "a", encoding="utf-8") as f:
        f.write("".join(rest[:-1]) + rest[-1][:20])  # the last record half written
        f.flush()
        partial = len(messages(demo_trace)) - sum(
            json.loads(line)["type"] == "message" for line in rest[-1:]
        )
        WebDriverWait(browser, 60).until(lambda d: len(rows(d)) == partial)
        f.write(rest[-1][20:])
    WebDriverWait(browser, 60).until(lambda d: len(rows(d)) == len(messages(demo_trace)))
    assert [r["decision"] for r in rows(browser)] == [r["decision"] for r in messages(demo_trace)]
    assert [u for u in requests_made(browser) if not u.startswith(url)] == []
    assert console_errors(browser) == []


def test_large_trace_renders_every_row(
    browser: webdriver.Chrome, tmp_path: Path, record_property: object
) -> None:
    """A trace of 100,000 messages: one row per message record; the time to first paint
    and to the last row is measured (reported, not asserted)."""
    trace = tmp_path / "big.jsonl"
    size = big_trace(str(trace), 100_000)
    url = write_page(trace, tmp_path / "big.html")
    page_size = (tmp_path / "big.html").stat().st_size
    expected = trace.read_text().count('"type":"message"')
    open_page(browser, url, timeout=300)
    got = browser.execute_script(
        """return {rows: document.querySelectorAll('#timeline .msg').length,
                   paint: performance.getEntriesByName('first-contentful-paint')[0].startTime,
                   first: performance.getEntriesByName('acp-view-first-rows')[0].startTime,
                   all: performance.getEntriesByName('acp-view-rendered')[0].startTime};"""
    )
    assert got["rows"] == expected >= 100_000
    record_property("first_contentful_paint_ms", got["paint"])  # type: ignore[operator]
    record_property("first_rows_ms", got["first"])  # type: ignore[operator]
    record_property("all_rows_ms", got["all"])  # type: ignore[operator]
    print(
        f"\n100,000-message trace ({size} B, page {page_size} B): first contentful paint "
        f"{got['paint']:.0f} ms, first rows drawn {got['first']:.0f} ms, "
        f"every row {got['all']:.0f} ms"
    )
    # only rows near the screen hold text; scrolling to the end fills the last rows
    filled = "return document.querySelectorAll('#timeline .msg > .box').length"
    assert 0 < browser.execute_script(filled) < 3000
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    WebDriverWait(browser, 60).until(
        lambda d: d.execute_script(
            "const r = document.querySelector('#timeline').lastElementChild;"
            "return r.textContent.indexOf('#' + r.dataset.seq) >= 0"
        )
    )
    assert 0 < browser.execute_script(filled) < 3000
    open_page(browser, url + "#decision=refused", timeout=300)
    shown = rows(browser, visible_only=True)
    assert shown
    assert {r["decision"] for r in shown} == {"refused"}
    assert console_errors(browser) == []
