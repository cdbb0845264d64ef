"""A tiny driver of headless Chromium for the report's browser test: the DevTools protocol
over ``--remote-debugging-pipe`` (JSON messages separated by NUL bytes on file descriptors 3
and 4 of the browser), so no port is opened and no Python package is needed."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

#: The flags that work as root in a container (no sandbox, no GPU) and keep the browser off
#: the network.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


def find() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """``with Browser() as b: b.open(url); b.evaluate("1 + 1")``."""

    def __init__(self, executable: str | None = None, *, timeout: float = 60.0):
        self.executable = executable or find()
        if self.executable is None:
            raise BrowserError("no chromium executable found")
        self.timeout = timeout
        self._id = 0
        self._buf = b""
        self.events: list[dict] = []

    def __enter__(self) -> "Browser":
        self.profile = tempfile.mkdtemp(prefix="recloop-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds():  # the protocol's descriptors: 3 reads commands, 4 writes replies
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self.profile}",
             "--remote-debugging-pipe", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target,
                                                           "flatten": True})["sessionId"]
        self.send("Page.enable", session=self.session)
        self.send("Runtime.enable", session=self.session)
        return self

    def __exit__(self, *exc) -> bool:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)
        return False

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from the browser in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise BrowserError("the browser closed the pipe")
                self._buf += chunk
        message, self._buf = self._buf.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, *, session: str | None = None):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for j, e in enumerate(self.events):
            if e.get("method") == event:
                return self.events.pop(j)
        while True:
            e = self._read(deadline)
            if e.get("method") == event:
                return e
            self.events.append(e)

    def open(self, url: str, *, width: int = 1200, height: int = 900) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1,
                                                         "mobile": False},
                  session=self.session)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=self.session)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True,
                                                "awaitPromise": True},
                           session=self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:60]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        """PNG of the whole page."""
        w, h = self.evaluate("[document.documentElement.scrollWidth, "
                             "document.documentElement.scrollHeight]")
        data = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}},
            session=self.session)["data"]
        return base64.b64decode(data)
