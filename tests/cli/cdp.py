"""A headless Chromium driven over the DevTools protocol, standard library only.

Chromium is started with ``--remote-debugging-pipe``: it reads commands (JSON, each
ended by a NUL byte) on its fd 3 and writes replies and events on its fd 4.  Used by
the browser tests of the flame graph and the report (test_flame_browser.py); they
are skipped when no Chromium is installed (Debian: ``apt-get install chromium``).
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

TIMEOUT = 60  # seconds for one command or page load; only a hang gets near it


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless browser with one page (tab) attached."""

    def __init__(self, exe, width=1300, height=900):
        self.profile = tempfile.mkdtemp(prefix="tg-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # fds 3 and 4 in the child: keep ours above them so the dup2s cannot clash
        hi = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def child_fds():
            os.dup2(hi[0], 3)
            os.dup2(hi[1], 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-pipe", "--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, pass_fds=(3, 4) + tuple(hi))
        for fd in hi:
            os.close(fd)
        self.w = os.fdopen(to_chrome_w, "wb", buffering=0)
        self.r = os.fdopen(from_chrome_r, "rb", buffering=0)
        self.next_id = 0
        self.replies = {}
        self.events = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)

    def _read(self):
        buf = b""
        while True:
            chunk = self.r.read(65536)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw.decode("utf-8"))
                with self.cond:
                    if "id" in msg:
                        self.replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self.cond.notify_all()

    def call(self, method, session=False, **params):
        """Sends a command (to the page with session=True); returns its result."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode("utf-8") + b"\0")
        deadline = time.time() + TIMEOUT
        with self.cond:
            while self.next_id not in self.replies:
                if not self.cond.wait(timeout=max(0.0, deadline - time.time())):
                    raise TimeoutError("no reply to %s" % method)
            reply = self.replies.pop(self.next_id)
        if "error" in reply:
            raise RuntimeError("%s: %s" % (method, reply["error"]))
        return reply.get("result", {})

    def open(self, url):
        """Loads URL in the page and waits for its load event."""
        with self.cond:
            start = len(self.events)
        self.call("Page.navigate", session=True, url=url)
        deadline = time.time() + TIMEOUT
        with self.cond:
            while not any(e.get("method") == "Page.loadEventFired"
                          for e in self.events[start:]):
                if not self.cond.wait(timeout=max(0.0, deadline - time.time())):
                    raise TimeoutError("page did not load: %s" % url)

    def js(self, expression):
        """The value of a JavaScript expression in the page (exceptions raise)."""
        res = self.call("Runtime.evaluate", session=True, expression=expression,
                        returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError("%s: %s" % (expression, res["exceptionDetails"]))
        return res["result"].get("value")

    def click(self, x, y):
        """A real mouse click (press and release) at viewport point (x, y)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y,
                      button="left", clickCount=1)

    def type_text(self, text):
        self.call("Input.insertText", session=True, text=text)

    def errors(self):
        """Console errors, uncaught exceptions and error log entries so far."""
        out = []
        with self.cond:
            events = list(self.events)
        for e in events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(p.get("exceptionDetails", {}))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(p.get("args"))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"])
        return out

    def fetched(self):
        """URLs requested so far, but for file: pages themselves and data: URIs."""
        with self.cond:
            events = list(self.events)
        urls = [e["params"]["request"]["url"] for e in events
                if e.get("method") == "Network.requestWillBeSent"]
        return [u for u in urls if not u.startswith(("data:", "file:", "about:"))]

    def screenshot(self, path, full=False):
        params = {"format": "png"}
        if full:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.w.close()
        shutil.rmtree(self.profile, ignore_errors=True)
