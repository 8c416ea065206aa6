"""What the tests share: a real ``hourglass serve`` of each test's own, and
waits that end at a deadline.

The server binary is ``$HOURGLASS_BIN`` (the Rust test that runs this suite
sets it to the binary cargo built). Each server listens on ``127.0.0.1:0``
and the test reads the ``http ADDR`` line it prints; a restart after
``kill -9`` listens on the port the first start was given, on the same data.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

#: How long a server may take to print its address.
START_WITHIN_S = 30.0

T = TypeVar("T")


def server_binary() -> str | None:
    """``$HOURGLASS_BIN``, if it is set."""
    return os.environ.get("HOURGLASS_BIN") or None


class Server:
    """An ``hourglass serve`` on a data directory of the test's own."""

    def __init__(self, binary: str, data: Path, *args: str) -> None:
        self.binary = binary
        self.data = data
        self.args = args
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data.parent / f"{data.name}-server.log"

    @property
    def url(self) -> str:
        assert self.port, "the server has not started"
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        """Starts it on the port it had (a free one the first time) and
        waits for its address."""
        assert self.process is None, "it is running"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data", str(self.data), *self.args],
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, "RUST_LOG": "hourglass=info,warn"},
            )
        assert self.process.stdout is not None
        address = _first_line_with(self.process.stdout, "http ", START_WITHIN_S)
        if address is None:
            self.kill()
            raise AssertionError(f"hourglass did not print its address within {START_WITHIN_S} s; its log:\n"
                                 + self.log_path.read_text(errors="replace")[-4000:])
        self.port = int(address.rsplit(":", 1)[1])
        return self

    def kill(self) -> None:
        """``kill -9``, and waits for it to be gone."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None

    def stop(self) -> None:
        """SIGTERM (a clean stop), else ``kill -9`` after 10 s."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
            self.process = None


def _first_line_with(stream: IO[bytes], prefix: str, within_s: float) -> str | None:
    """The rest of the first line of ``stream`` that starts with ``prefix``,
    read by a thread (which then drains the stream to its end), or ``None``
    if none came within ``within_s``."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for raw in stream:
            lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True, name="hourglass-stdout").start()
    deadline = time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return None
        if line is None:
            return None
        if line.startswith(prefix):
            return line[len(prefix):]
    return None


def wait_for(condition: Callable[[], T], within_s: float, what: str, every_s: float = 0.01) -> T:
    """Waits until ``condition()`` is true, returning its value; fails with
    ``what`` (and the last value) if it is not within ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {within_s} s: {what} (last: {value!r})")
        time.sleep(every_s)


@contextmanager
def silent_port() -> Iterator[int]:
    """A port of 127.0.0.1 bound but not listening, for the ``with`` block:
    a connection to it is refused, and nobody else can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
