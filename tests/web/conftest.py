"""The browser the web tests drive: Debian's chromium, headless, through Playwright, against the real server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..conftest import REPO

CHROMIUM = Path(os.environ.get("KWIKI_CHROMIUM", "/usr/bin/chromium"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
SHOTS = REPO / "test-output" / "web"


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):  # .ci/run installs it: its absence there is a failure
            pytest.fail(f"{CHROMIUM} is missing: .ci/run should have installed chromium")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(120_000)  # the first search waits for the model on a busy 2-core box
    yield pg
    ctx.close()


def shot(pg, name: str) -> None:
    """A full-page screenshot under test-output/web/ (for a person to look at; nothing asserts on it)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / name), full_page=True)
