"""The README's Python consumer, run as written: taken from README.md (so
that it cannot drift from what the tests run), pointed at a server of the
test's own through ``HOURGLASS_SERVER``, stopped with SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from hourglass_client import Client
from support import Server, wait_for

REPOSITORY = Path(__file__).resolve().parents[3]
#: The words that introduce the example in the README.
INTRODUCED_BY = "A consumer in Python"


def readme_example() -> str:
    """The first ``python`` block after :data:`INTRODUCED_BY` in README.md."""
    readme = (REPOSITORY / "README.md").read_text()
    start = readme.index(INTRODUCED_BY)
    found = re.compile(r"^```python\n(.*?)^```$", re.M | re.S).search(readme, start)
    assert found, f"README.md has no python block after {INTRODUCED_BY!r}"
    return found.group(1)


def test_the_readme_consumer_runs_as_written(server: Server, client: Client, tmp_path: Path) -> None:
    example = readme_example()
    assert len(example.strip().splitlines()) <= 12, "about ten lines"
    script = tmp_path / "consumer.py"
    script.write_text(example)
    client.enqueue_batch("orders", [{"payload": {"order": n}} for n in range(20)])
    log = tmp_path / "consumer.log"
    source = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "HOURGLASS_SERVER": server.url, "PYTHONPATH": str(source)}
    with open(log, "wb") as output:
        consumer = subprocess.Popen([sys.executable, str(script)], stdout=output, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: client.queue("orders").acked == 20, 30, "the README's consumer acked the 20 orders")
        consumer.send_signal(signal.SIGTERM)
        code = consumer.wait(timeout=30)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(timeout=30)
    text = log.read_text()
    print(text[-600:])
    assert code == 0, text
    assert "order 7: closing it if unpaid" in text and "SIGTERM: stopping" in text
    assert "worker stopped: handled 20" in text, text
