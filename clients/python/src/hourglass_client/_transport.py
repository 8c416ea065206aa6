"""What the blocking and the asyncio client share about sending: the base
URL, the headers, the timeouts, and following a listing's cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar

import httpx

from ._version import __version__
from ._calls import Call
from .limits import WAIT_MS_MAX

#: How long a request may take, besides a claim's long poll.
DEFAULT_TIMEOUT_MS = 30_000

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Transport:
    """A server's address, the headers every request carries, and each
    request's timeout."""

    def __init__(self, base_url: str, token: str | None, timeout_ms: int) -> None:
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, not {timeout_ms}")
        self.base_url = base_url.rstrip("/")
        self.timeout_ms = timeout_ms
        self.headers = {"user-agent": f"hourglass-client-python/{__version__}"}
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"

    def url(self, call: Call[T]) -> str:
        """The call's URL, for messages."""
        return f"{self.base_url}{call.path}"

    def timeout(self, call: Call[T]) -> httpx.Timeout:
        """The call's timeout: the client's, plus the time the server may
        hold the answer back (a claim's wait, which the server caps)."""
        wait_ms = min(max(call.wait_ms, 0), WAIT_MS_MAX)
        return httpx.Timeout((self.timeout_ms + wait_ms) / 1000, connect=self.timeout_ms / 1000)


class Page(Protocol, Generic[T_co]):
    """A page of a listing: its items, and the cursor of the next page."""

    @property
    def items(self) -> Sequence[T_co]: ...

    @property
    def next(self) -> str | None: ...


def follow(fetch: Callable[[str | None], Page[T]]) -> Iterator[T]:
    """Every item of a listing: ``fetch(after)`` a page at a time, from the
    first (``after`` ``None``) to the one without ``next``."""
    after: str | None = None
    while True:
        page = fetch(after)
        yield from page.items
        if page.next is None:
            return
        after = page.next


async def follow_async(fetch: Callable[[str | None], Awaitable[Page[T]]]) -> AsyncIterator[T]:
    """:func:`follow` for a client whose ``fetch`` is a coroutine."""
    after: str | None = None
    while True:
        page = await fetch(after)
        for item in page.items:
            yield item
        if page.next is None:
            return
        after = page.next
