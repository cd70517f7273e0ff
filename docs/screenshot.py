"""Makes docs/view.png: the page ``acp-proxy view`` draws of an ``acp-proxy demo`` trace.

Run from a clone with the test extra installed (selenium) and Debian's
``chromium`` and ``chromium-driver``::

    .venv/bin/python docs/screenshot.py [OUT.png]

It runs the demo (a real proxy between the scripted client and agent),
writes the page of its trace with ``acp-proxy view TRACE -o FILE.html``,
opens it from disk in headless Chromium and saves a screenshot.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser.conftest import console_errors, open_page, start_browser  # noqa: E402

from acp_proxy.demo.runner import execute  # noqa: E402


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-proxy-shot-") as tmp:
        trace = Path(tmp) / "demo.trace.jsonl"
        page = Path(tmp) / "demo.html"
        execute(trace=str(trace))
        subprocess.run(
            [sys.executable, "-m", "acp_proxy", "view", str(trace), "-o", str(page)], check=True
        )
        driver = start_browser(str(Path(tmp) / "profile"))
        try:
            driver.set_window_size(1440, 1500)
            open_page(driver, page.as_uri())
            # a stable title: the temporary file's name says nothing
            driver.execute_script("document.getElementById('title').textContent = 'demo trace'")
            # the refused prompt to a child, opened in the side panel
            driver.execute_script(
                "document.querySelector('.msg[data-decision=\"refused\"]').click()"
            )
            errors = console_errors(driver)
            if errors:
                raise SystemExit(f"the page logged errors: {errors}")
            driver.save_screenshot(str(out))
        finally:
            driver.quit()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "view.png")
