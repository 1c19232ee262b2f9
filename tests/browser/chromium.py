"""Headless Chromium (Debian's `chromium`) for the HTML report tests: a screenshot, and the state of
every image after the page loaded."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--mute-audio"]

# Appended to a copy of the page: after the load event, the images' state and the page height as JSON.
PROBE = """<script>window.addEventListener('load', () => {
  const images = [...document.images].map(i => ({id: i.id, alt: i.alt, complete: i.complete,
    width: i.naturalWidth, height: i.naturalHeight, scheme: i.src.split(':')[0]}));
  const out = document.createElement('pre'); out.id = 'probe';
  out.textContent = JSON.stringify({images, height: document.documentElement.scrollHeight,
    links: [...document.querySelectorAll('link[href], script[src], iframe')].length});
  document.body.appendChild(out);
});</script>"""


def binary() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def unavailable_reason() -> str | None:
    if binary():
        return None
    return "needs chromium (tests/browser/install.sh installs Debian's chromium as root)"


def _run(args: list[str], tmp: Path, timeout=120) -> subprocess.CompletedProcess:
    profile = tmp / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [binary(), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def probe(page: Path, tmp: Path) -> dict:
    """Load a copy of `page` with PROBE appended; {images: [...], height, links}."""
    copy = tmp / "probe.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _run(["--virtual-time-budget=10000", "--dump-dom", copy.as_uri()], tmp).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    if not found:
        raise AssertionError(f"the probe did not run; DOM tail:\n{dom[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


def texts(page: Path, tmp: Path, selectors: list[str]) -> dict:
    """The text a reader sees (innerText, as laid out) of the first element of each CSS selector, after load."""
    script = (
        "<script>window.addEventListener('load', () => { const out = document.createElement('pre'); "
        "out.id = 'texts'; out.textContent = JSON.stringify(Object.fromEntries("
        f"{json.dumps(selectors)}.map(s => [s, (document.querySelector(s) || {{innerText: null}}).innerText])));"
        " document.body.appendChild(out); });</script>"
    )
    copy = tmp / "texts.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    dom = _run(["--virtual-time-budget=10000", "--dump-dom", copy.as_uri()], tmp).stdout
    found = re.search(r'<pre id="texts">(.*?)</pre>', dom, re.S)
    if not found:
        raise AssertionError(f"the script did not run; DOM tail:\n{dom[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, png: Path, tmp: Path, width: int = 1200, height: int = 2000) -> Path:
    _run([f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()], tmp)
    return png


def section_screenshot(page: Path, ident: str, png: Path, tmp: Path, width: int = 1200, height: int = 1400) -> Path:
    """The page's header and its section `ident` alone (the other sections cut from a copy), as a reader
    sees them. With GENJUDGE_SCREENSHOTS set to a directory, a copy is kept there to look at."""
    text = page.read_text(encoding="utf-8")
    if f'<section id="{ident}">' not in text:
        raise AssertionError(f"{page} has no section {ident!r}")
    kept = re.sub(r'<section id="(\w+)">.*?</section>', lambda m: m[0] if m[1] == ident else "", text, flags=re.S)
    copy = tmp / f"{png.stem}.html"
    copy.write_text(kept, encoding="utf-8")
    _run([f"--window-size={width},{height}", f"--screenshot={png}", copy.as_uri()], tmp)
    keep = os.environ.get("GENJUDGE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    return png


def ink(png: Path) -> float:
    """The share of pixels that are not background white: 0 for a blank screenshot."""
    from PIL import Image

    with Image.open(png) as im:
        grey = im.convert("L")
        hist = grey.histogram()
    return 1 - sum(hist[250:]) / sum(hist)
