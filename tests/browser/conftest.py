"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by selenium.

The browser starts with a new empty profile, no network services of its own
(no sync, component updates, background requests, QUIC), and logs what the
page printed (``browser`` log) and every request it made (``performance``
log, Chrome DevTools ``Network`` events), so a test can check that a page
opened from disk asked for nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,900",
)


def start_browser(profile: str) -> webdriver.Chrome:
    """A headless Chromium with an empty profile in ``profile``, its logs recorded."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


@pytest.fixture(scope="session")
def browser() -> Iterator[webdriver.Chrome]:
    """One browser for the browser tests (a new empty profile, removed at the end)."""
    profile = tempfile.mkdtemp(prefix="acp-proxy-chromium-")
    driver = start_browser(profile)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wire trace of a real ``acp-proxy demo`` run (with content)."""
    from acp_proxy.demo.runner import execute

    path = tmp_path_factory.mktemp("demo") / "demo.trace.jsonl"
    execute(trace=str(path))
    assert path.stat().st_size > 0
    return path


def open_page(driver: webdriver.Chrome, url: str, timeout: float = 120.0) -> None:
    """Opens ``url`` and waits until the page has rendered every row."""
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(url)
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.rendered") == "all"
    )


def requests_made(driver: webdriver.Chrome) -> list[str]:
    """The URLs the browser asked for since the last call (performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message: dict[str, Any] = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def console_errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The page's console messages of level SEVERE since the last call."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
