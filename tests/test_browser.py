"""The HTML report in a real browser: headless Chromium (Debian's ``chromium`` package;
.ci/run installs it) loads the page of a real failing run from a file, runs its script
and dumps the DOM it ends with: the summary and the cases are there, every picture
decoded (the page's own count, ``data-images-loaded``), the table sorted as the address
asks. A screenshot of the page is saved as reports/html-report.png (an artifact of the
CI run). Without a browser the test is skipped, saying how to get one."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from test_html_report import HOSTILE, failing_run
from gradcheck.report.html import render_html

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "reports" / "html-report.png"
TIMEOUT = 60


def chromium() -> str | None:
    return (shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome"))


def browse(profile: Path, url: str, *args: str) -> str:
    """Chromium's stdout for ``url`` (the whole process group killed past TIMEOUT)."""
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--disable-dev-shm-usage",   # (a container's /dev/shm is small)
            f"--user-data-dir={profile}", "--virtual-time-budget=5000", *args, url]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish in {TIMEOUT} s")
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode("utf-8")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if chromium() is None:
        pytest.skip("no Chromium: apt-get install chromium (.ci/run installs it)")
    folder = tmp_path_factory.mktemp("browser")
    run = failing_run(folder)
    page = folder / "report.html"
    page.write_text(render_html(run), encoding="utf-8")
    return run, page, folder / "profile"


def test_the_page_loads_with_its_pictures_sorts_and_is_screenshot(report):
    run, page, profile = report
    dom = browse(profile, page.as_uri() + "#sort=-name", "--dump-dom")
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-script="ran"' in body and 'data-sorted="-name"' in body
    images = dom.count("<img")
    maps = sum(len(w.error_maps) for c in run.cases for w in c.witnesses)
    assert images == 2 * maps >= 4
    assert f'data-images-loaded="{images}/{images}"' in body
    assert "2 passed" in dom and "2 failed" in dom
    names = re.findall(r'<td data-key="name" data-sort="([^"]*)"', dom)
    shown = [c.name.replace("<", "&lt;").replace(">", "&gt;") for c in run.cases]
    assert names == sorted(shown, reverse=True)      # sorted by the page's script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom and HOSTILE not in dom
    assert "W.grad is the transpose of the exact gradient" in dom
    # (one test: xdist would give a second test a second run of the cases)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    browse(profile, page.as_uri(), f"--screenshot={SCREENSHOT}", "--window-size=1280,2000",
           "--hide-scrollbars")
    data = SCREENSHOT.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)
