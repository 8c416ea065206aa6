"""Fixtures: a real server of each test's own, and clients of it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hourglass_client import Client
from support import Server, server_binary

ServerFactory = Callable[..., Server]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[ServerFactory]:
    """Starts servers with the given extra arguments (each on its own data
    directory); kills them all at the end of the test."""
    binary = server_binary()
    if binary is None:
        message = "HOURGLASS_BIN is not set: it names the hourglass binary (cargo build -p hourglass-cli)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    started: list[Server] = []

    def start(*args: str) -> Server:
        server = Server(binary, tmp_path / f"data-{len(started)}", *args)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.kill()


@pytest.fixture
def server(start_server: ServerFactory) -> Server:
    """A server with the default settings."""
    return start_server()


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url) as client:
        yield client
