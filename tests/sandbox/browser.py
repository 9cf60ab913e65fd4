"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client), for the console page's
own JavaScript: what `make run`'s browser does, without a test framework for browsers. Tests that need it are
skipped where no Chromium is installed."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = next(filter(None, (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome"))), None)


class Page:
    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        await self._socket.send_str(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads((await self._socket.receive(timeout=30)).data)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        """The expression's value in the page (a promise is awaited); a thrown error raises here."""
        answer = await self._call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression!r} threw: {answer['exceptionDetails']}")
        return answer.get("result", {}).get("value")

    async def wait_until(self, expression: str, *, timeout: float = 15.0) -> Any:
        """Poll the expression until it is truthy; its value."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if loop.time() > deadline:
                raise TimeoutError(f"{expression!r} still falsy after {timeout} s")
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def browser_page(url: str) -> AsyncIterator[Page]:
    """A headless Chromium showing `url`, closed (with its profile folder) afterwards."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="pitcrew-chromium-") as profile:
        process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            for _ in range(300):  # Chromium writes its port once it listens
                if port_file.exists() and port_file.read_text().strip():
                    break
                await asyncio.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            async with aiohttp.ClientSession() as http:
                async with http.put(f"http://127.0.0.1:{port}/json/new?{url}") as opened:
                    target = await opened.json()
                async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                    page = Page(socket)
                    await page.wait_until("document.readyState === 'complete'")
                    yield page
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
