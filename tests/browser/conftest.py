"""Fixtures for the console tests: a broker with its embedded schema registry, the console served
by the broker's admin HTTP listener (as `samsa serve` runs it), and a headless Chromium (Debian's
chromium + chromium-driver, driven by selenium). Screenshots go to build/test-artifacts/console/."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.console.context import ConsoleContext
from samsa.testing import SamsaBroker, free_port
from samsa.testing.registry import wait_http

from .consoleserver import ConsoleServer

ARTIFACTS = Path(os.environ.get("SAMSA_TEST_ARTIFACTS", Path(__file__).parents[2] / "build" /
                                "test-artifacts")) / "console"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def stack() -> Iterator[dict[str, Any]]:
    rport = free_port()
    overrides = {"schema.registry.enable": "true",
                 "schema.registry.listeners": f"http://127.0.0.1:{rport}"}
    with SamsaBroker(overrides=overrides) as broker:
        registry = f"http://127.0.0.1:{rport}"
        wait_http(registry, 30)
        assert broker.admin_url is not None
        wait_http(broker.admin_url, 30)
        yield {"broker": broker, "registry": registry, "console": broker.admin_url}


@pytest.fixture(scope="module")
def standalone(stack: dict[str, Any]) -> Iterator[ConsoleServer]:
    """The same console run alone on a thread of the test process (`python -m samsa.console`'s
    way), for checks that need its internals (`.app.state.console`)."""
    with ConsoleServer(ConsoleContext(stack["broker"].bootstrap, registry_url=stack["registry"])) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (make system-deps)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: Any, name: str) -> Path:
    """A full-page screenshot as a test artifact."""
    path = ARTIFACTS / f"{name}.png"
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 40, 3000)))
    time.sleep(0.05)
    driver.save_screenshot(str(path))
    return path
