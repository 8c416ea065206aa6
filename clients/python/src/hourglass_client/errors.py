"""What can go wrong with a request, typed.

Every error of this package is an :class:`HourglassError`:

- :class:`ApiError`: the server answered ``{"error": {"code", "message"}}``
  with a 4xx or 5xx. It carries the HTTP ``status``, the server's stable
  ``code`` and its ``message``; a subclass for each kind of code, so that
  ``except StaleLease:`` reads as what it means.
- :class:`Unreachable`: the request was not sent or its answer never came
  (nothing listens, the connection broke, a timeout).
- :class:`DecodeError`: an answer that is not the API's JSON (a proxy's
  HTML page, say).

``error.retryable`` says whether trying again later may succeed: the server
was unreachable, failed (5xx), is out of storage (507) or full (429).
"""

from __future__ import annotations

__all__ = [
    "ApiError",
    "Conflict",
    "DecodeError",
    "HourglassError",
    "InvalidRequest",
    "NotFound",
    "OverBudget",
    "PayloadTooLarge",
    "ServerError",
    "StaleLease",
    "TooMany",
    "Unauthorized",
    "Unreachable",
    "Unsupported",
]

#: Bytes of an unreadable answer kept in a :class:`DecodeError`.
DECODE_BODY_BYTES_MAX = 512

#: HTTP statuses after which a later try may succeed, besides every 5xx.
_RETRYABLE_4XX = frozenset({429})


class HourglassError(Exception):
    """The root of this package's errors."""

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later, unchanged."""
        return False


class Unreachable(HourglassError):
    """The request was not sent, or its answer not received.

    Its ``__cause__`` is httpx's error (a refused connection, a timeout...).
    """

    def __init__(self, method: str, url: str, reason: str) -> None:
        super().__init__(f"cannot reach {method} {url}: {reason}")
        self.method = method
        self.url = url

    @property
    def retryable(self) -> bool:
        return True


class DecodeError(HourglassError):
    """An answer that is not the JSON the API sends for the request."""

    def __init__(self, url: str, status: int, body: bytes, reason: str) -> None:
        text = body[:DECODE_BODY_BYTES_MAX].decode("utf-8", "replace")
        super().__init__(f"{url} answered {status} with what is not the API's JSON ({reason}): {text}")
        self.url = url
        self.status = status
        self.body = text

    @property
    def retryable(self) -> bool:
        return self.status >= 500 or self.status in _RETRYABLE_4XX


class ApiError(HourglassError):
    """The server refused or failed the request.

    ``status`` is the HTTP status, ``code`` the server's stable code
    (``not_found``, ``stale_lease``, ``invalid``...) and ``message`` what
    went wrong, for a person.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.status >= 500 or self.status in _RETRYABLE_4XX

    @staticmethod
    def of(status: int, code: str, message: str) -> ApiError:
        """The error for ``code``, of the subclass that names it (by the
        status when the code is one this package does not know)."""
        kind = _BY_CODE.get(code) or _BY_STATUS.get(status)
        if kind is None:
            kind = ServerError if status >= 500 else ApiError
        return kind(status, code, message)


class InvalidRequest(ApiError):
    """400: the request is wrong (``invalid``, ``invalid_json``,
    ``invalid_path``, ``invalid_query``); its message says how."""


class Unauthorized(ApiError):
    """401 ``unauthorized``: a missing or wrong bearer token."""


class Forbidden(ApiError):
    """403 ``forbidden``: the token is known but lacks the permission on the
    queue (the message names both); or ``read_only_ui``."""


class NotFound(ApiError):
    """404 ``not_found``: no such task, schedule, queue or live key (or
    ``no_route``: no such endpoint)."""


class Conflict(ApiError):
    """409 ``conflict``: not in this state (cancelling a leased task, say)."""


class StaleLease(Conflict):
    """409 ``stale_lease``: the lease is not the task's current one; the
    request changed nothing. The delivery was given up (its lease ran out)."""


class PayloadTooLarge(ApiError):
    """413 ``payload_too_large``: over the server's payload limit."""


class TooMany(ApiError):
    """429 ``too_many_tasks`` or ``too_many_schedules``: the server holds its
    maximum."""


class OverBudget(ApiError):
    """507 ``over_memory_budget``, ``over_disk_budget`` or ``disk_full``: the
    enqueue changed nothing."""


class Unsupported(ApiError):
    """501 ``unsupported``: not on this backend (schedules on Redis)."""


class ServerError(ApiError):
    """5xx: the server failed (``storage``), is stopping (``shutting_down``) or
    cannot reach its store (``store_unavailable``, 503: try again)."""


_BY_CODE: dict[str, type[ApiError]] = {
    "invalid": InvalidRequest,
    "invalid_json": InvalidRequest,
    "invalid_path": InvalidRequest,
    "invalid_query": InvalidRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "no_route": NotFound,
    "conflict": Conflict,
    "stale_lease": StaleLease,
    "payload_too_large": PayloadTooLarge,
    "too_many_tasks": TooMany,
    "too_many_schedules": TooMany,
    "over_memory_budget": OverBudget,
    "over_disk_budget": OverBudget,
    "disk_full": OverBudget,
    "unsupported": Unsupported,
    "storage": ServerError,
    "shutting_down": ServerError,
    "store_unavailable": ServerError,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: TooMany,
    501: Unsupported,
    507: OverBudget,
}
