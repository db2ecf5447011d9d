"""A headless Chromium driven over the DevTools protocol on a local pipe (no network port): open
a page, collect its console errors and uncaught exceptions, run JavaScript, take screenshots."""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        """Start Chromium with --remote-debugging-pipe and attach to its page."""
        exe = shutil.which("chromium")
        if exe is None:
            raise RuntimeError(
                "chromium is not installed (Debian package chromium, ./setup.sh --tests)"
            )
        self.profile = tempfile.mkdtemp(prefix="numapore-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # the protocol's pipe is fd 3 (commands in) and 4 (replies out)
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [
                exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}", "about:blank",
            ],
            preexec_fn=fds, pass_fds=(3, 4),  # kept open after fds() put the pipe there
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.events: queue.Queue = queue.Queue()
        self.replies: dict[int, dict] = {}
        self.ready = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        attached = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self.session = attached["sessionId"]
        self.errors: list[str] = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _read(self) -> None:
        """Read NUL-separated JSON messages: replies by id, everything else as events."""
        buffer = b""
        with os.fdopen(self._from_browser, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                buffer += chunk
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    message = json.loads(raw)
                    if "id" in message:
                        with self.ready:
                            self.replies[message["id"]] = message
                            self.ready.notify_all()
                    else:
                        self.events.put(message)

    def call(self, method: str, session: bool = False, **params) -> dict:
        """Send one command and wait for its reply (RuntimeError on a protocol error)."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        with self.ready:
            if not self.ready.wait_for(lambda: self.next_id in self.replies, timeout=60):
                raise RuntimeError(f"chromium did not answer {method}")
            reply = self.replies.pop(self.next_id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def drain(self, seconds: float) -> list[dict]:
        """Collect events for a while, keeping console errors and uncaught exceptions."""
        end = time.monotonic() + seconds
        seen = []
        while (left := end - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                break
            seen.append(event)
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                args = [a.get("value", a.get("description")) for a in params["args"]]
                self.errors.append(f"console.{params['type']}: {args}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description", details.get("text"))
                self.errors.append(f"uncaught exception: {text}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                self.errors.append(f"log error: {params['entry'].get('text')}")
        return seen

    def open(self, path: Path, settle: float = 3.0) -> None:
        """Load a local file and wait for its load event, then for scripts to settle."""
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if any(e.get("method") == "Page.loadEventFired" for e in self.drain(0.5)):
                break
        else:
            raise RuntimeError(f"{path} did not finish loading")
        self.drain(settle)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, output: Path) -> Path:
        """Save what the page shows as PNG."""
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        output.write_bytes(base64.b64decode(data))
        return output

    def __enter__(self) -> Browser:
        """The browser itself."""
        return self

    def __exit__(self, *exc) -> None:
        """Stop Chromium (this process only) and remove its profile folder."""
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        shutil.rmtree(self.profile, ignore_errors=True)
