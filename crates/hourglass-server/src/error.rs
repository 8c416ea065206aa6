//! Errors as the API shows them: `{"error": {"code": "...", "message": "..."}}`
//! ([`ErrorBody`]) with a 4xx status, or a 5xx for the server's own
//! failures. A server failure is logged with its whole cause chain; the
//! client sees its stable code and a message without the internals.

use std::error::Error;
use std::fmt;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hourglass_queue::QueueError;
use hourglass_wire::{ErrorBody, ErrorDetail, ParseError};

/// An error on its way to the client, keeping what caused it as its
/// [`source`](Error::source): the backend's [`QueueError`], the text that
/// did not parse, or axum's rejection of the request.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    source: Option<Box<dyn Error + Send + Sync>>,
}

/// What a client is told when the store was lost during its request.
const STORE_UNAVAILABLE: &str =
    "the store cannot be reached; the change may or may not have been made: try again (GET /healthz says why)";

impl ApiError {
    /// An error with an explicit status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), source: None }
    }

    /// A malformed request: 400 `invalid`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// A missing or wrong bearer token.
    pub fn unauthorized() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid bearer token is required")
    }

    /// A known token without the permission: 403 `forbidden`, naming the
    /// permission and, if given, the queue; never which tokens exist.
    pub(crate) fn forbidden(permission: crate::access::Permission, queue: Option<&str>) -> ApiError {
        let message = match queue {
            Some(queue) => format!("this token may not {permission} in queue {queue:?} (it needs {permission})"),
            None => format!("this token may not {permission} here (it needs {permission} on the queues concerned)"),
        };
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// A known token that holds the permission, but not on every queue, on
    /// a route whose figures tell of every queue: 403 `forbidden`.
    pub(crate) fn forbidden_everywhere(permission: crate::access::Permission) -> ApiError {
        let message = format!("this token may not {permission} here (it needs {permission} on every queue, \"*\")");
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// The store cannot be reached (not yet, or not any more): 503
    /// `store_unavailable`, and the request was not sent to it. Why is
    /// `/healthz`'s to show.
    pub fn store_unavailable() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the store cannot be reached, nothing was changed: try again (GET /healthz says why)",
        )
    }

    /// A route that does not exist.
    pub fn no_route() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such endpoint")
    }

    /// Caused by `source`.
    fn caused_by(self, source: impl Error + Send + Sync + 'static) -> ApiError {
        ApiError { source: Some(Box::new(source)), ..self }
    }

    /// The answer's status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The answer's stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message the client sees.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error as an answer shows it (logged first if it is the server's
    /// own failure): for an answer that holds several, such as a batch of acks.
    pub(crate) fn detail(self) -> ErrorDetail {
        self.log();
        ErrorDetail { code: self.code.to_owned(), message: self.message }
    }

    /// Logs a failure of the server's own, with its causes; not the request's
    /// errors. 501 is the request's: an operation this backend lacks.
    fn log(&self) {
        // An outage of the store is logged by the backend, when it begins
        // and at a slowing interval, not once a request.
        let logged_elsewhere = self.status == StatusCode::NOT_IMPLEMENTED || self.code == "store_unavailable";
        if self.status.is_server_error() && !logged_elsewhere {
            let cause = self.source().map(chain).unwrap_or_default();
            tracing::error!(status = self.status.as_u16(), code = self.code, %cause, "request failed");
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.message)
    }
}

impl Error for ApiError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|source| source as &(dyn Error + 'static))
    }
}

impl From<QueueError> for ApiError {
    fn from(error: QueueError) -> ApiError {
        let status = match &error {
            QueueError::Invalid(_) => StatusCode::BAD_REQUEST,
            QueueError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            QueueError::NotFound(_) | QueueError::ScheduleNotFound(_) => StatusCode::NOT_FOUND,
            QueueError::StaleLease(_) | QueueError::Conflict(_) => StatusCode::CONFLICT,
            QueueError::TooManyTasks { .. } | QueueError::TooManySchedules { .. } => StatusCode::TOO_MANY_REQUESTS,
            QueueError::OverMemoryBudget { .. } | QueueError::OverDiskBudget { .. } | QueueError::DiskFull(_) => {
                StatusCode::INSUFFICIENT_STORAGE
            }
            QueueError::ShuttingDown | QueueError::StoreUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            QueueError::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
            QueueError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        // What failed below the backend (a database's or Redis's error) is
        // the server's log's to show, not the client's.
        let message = match &error {
            QueueError::Storage(_) => {
                "storage failed; the change may or may not have been made (the server's log says why)".to_owned()
            }
            QueueError::DiskFull(_) => "the disk is full, nothing was changed".to_owned(),
            QueueError::StoreUnavailable(_) => STORE_UNAVAILABLE.to_owned(),
            _ if status == StatusCode::INTERNAL_SERVER_ERROR => "the server failed (its log says why)".to_owned(),
            _ => error.to_string(),
        };
        ApiError::new(status, error.code(), message).caused_by(error)
    }
}

impl From<ParseError> for ApiError {
    fn from(error: ParseError) -> ApiError {
        ApiError::invalid(error.to_string()).caused_by(error)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        if has_cause::<crate::body_deadline::TooSlow>(&rejection) {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body did not arrive within the body timeout (--body-timeout)",
            )
            .caused_by(rejection);
        }
        let status = rejection.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "invalid_json",
        };
        let status = if status.is_client_error() { status } else { StatusCode::BAD_REQUEST };
        ApiError::new(status, code, rejection.body_text()).caused_by(rejection)
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", rejection.body_text()).caused_by(rejection)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", rejection.body_text()).caused_by(rejection)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        (self.status, axum::Json(ErrorBody::new(self.code, self.message))).into_response()
    }
}

/// Whether `error` or one of its causes is an `E`.
fn has_cause<E: Error + 'static>(error: &(dyn Error + 'static)) -> bool {
    std::iter::successors(Some(error), |&error| error.source()).any(|error| error.is::<E>())
}

/// `error` and its causes, each once: many errors show their cause in their
/// own message already.
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_queue::Failure;

    #[derive(Debug)]
    struct Inner;

    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("sector 7 unreadable")
        }
    }

    impl Error for Inner {}

    #[derive(Debug)]
    struct Outer(Inner);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the device is gone")
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_storage_failure_keeps_its_cause_and_shows_the_client_none_of_it() {
        let error = ApiError::from(QueueError::Storage(Failure::new("cannot write the task", Outer(Inner))));
        assert_eq!((error.status(), error.code()), (StatusCode::INTERNAL_SERVER_ERROR, "storage"));
        assert!(!error.message().contains("device") && !error.message().contains("cannot write"), "{error}");
        let source = error.source().expect("the QueueError");
        assert!(source.downcast_ref::<QueueError>().is_some());
        assert_eq!(
            chain(source),
            "storage failed: cannot write the task: the device is gone: sector 7 unreadable",
            "each cause once"
        );
        let full = ApiError::from(QueueError::DiskFull(Failure::new("the write failed", Outer(Inner))));
        assert_eq!((full.status(), full.code()), (StatusCode::INSUFFICIENT_STORAGE, "disk_full"));
        assert_eq!(full.message(), "the disk is full, nothing was changed");
    }

    #[test]
    fn a_request_s_error_says_what_the_backend_said() {
        let error = ApiError::from(QueueError::StaleLease(5));
        assert_eq!((error.status(), error.code()), (StatusCode::CONFLICT, "stale_lease"));
        assert_eq!(error.message(), "the lease on task 5 is not current");
        let error = ApiError::from("zz".parse::<hourglass_wire::Lease>().unwrap_err());
        assert_eq!((error.status(), error.code()), (StatusCode::BAD_REQUEST, "invalid"));
        assert!(error.source().is_some_and(|source| source.is::<ParseError>()));
    }
}
