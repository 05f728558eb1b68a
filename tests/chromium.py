"""Debian's headless Chromium, as every page test and bench launches it (never a downloaded
browser): one set of flags, one module-scoped fixture, one way to collect a page's errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
# a page that plays: Playwright mutes Chromium unless told not to, and Web Audio waits for a
# gesture unless the policy says otherwise
AUDIO_ARGS = ["--autoplay-policy=no-user-gesture-required"]
AUDIO_LAUNCH: dict[str, Any] = {"ignore_default_args": ["--mute-audio"]}


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/system-deps.sh "
                    "test does); these tests never download a browser")


def launched(*extra: str, audio: bool = False, timeout_ms: int = 10_000,
             **launch: Any) -> Iterator[Browser]:
    """A Chromium for a module's tests (yield from it in a fixture). `timeout_ms`: how long an
    `expect` waits; the pages follow the audio device's clock, and on a loaded machine a phase
    may come a few seconds late, which is no failure of the pages."""
    require_chromium()
    expect.set_options(timeout=timeout_ms)
    args = [*CHROMIUM_ARGS, *(AUDIO_ARGS if audio else ()), *extra]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args,
                              **({**AUDIO_LAUNCH, **launch} if audio else launch))
        try:
            yield b
        finally:
            b.close()


def another(browser: Browser, *extra: str, audio: bool = False) -> Browser:
    """One more Chromium, with other flags, from the Playwright that launched `browser` (a
    second sync Playwright cannot start inside the first); the caller closes it."""
    args = [*CHROMIUM_ARGS, *(AUDIO_ARGS if audio else ()), *extra]
    return browser.browser_type.launch(executable_path=CHROMIUM, args=args,
                                       **(AUDIO_LAUNCH if audio else {}))


def watch_errors(page: Page, errors: list[str], prefix: str = "") -> Page:
    """Collect the page's script errors and console errors into `errors` (a missing resource
    is the test's to check, not an error of the page's script)."""
    page.on("pageerror", lambda e: errors.append(f"{prefix}{e}"))
    page.on("console", lambda m: errors.append(f"{prefix}{m.text}") if m.type == "error"
            and not m.text.startswith("Failed to load resource") else None)
    return page


# three Latin words or more in a row: an English sentence left on a Japanese page (a key name
# such as server.channels[].output or a command such as `yomite devices` is no sentence)
_ENGLISH = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?(?: +[A-Za-z]+(?:'[A-Za-z]+)?){2,}")


def english_in(text: str) -> list[str]:
    """The English sentences in a Japanese page's text (empty when there are none)."""
    return _ENGLISH.findall(text)
