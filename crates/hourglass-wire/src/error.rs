//! How the API answers a request it refused or failed:
//! `{"error": {"code": "...", "message": "..."}}` with a 4xx or 5xx status.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The body of every error answer.
///
/// ```
/// use hourglass_wire::ErrorBody;
///
/// let body = ErrorBody::new("not_found", "no task 7");
/// assert_eq!(serde_json::to_string(&body).unwrap(), r#"{"error":{"code":"not_found","message":"no task 7"}}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

impl ErrorBody {
    /// An error answer with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: code.into(), message: message.into() } }
    }
}

/// An error: a stable code for programs, a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Short, stable, machine-readable: `invalid`, `not_found`,
    /// `stale_lease`, `conflict`, `payload_too_large`, `too_many_tasks`,
    /// `invalid_json`, `unauthorized`...
    pub code: String,
    /// What went wrong, for a person; never the server's internals.
    pub message: String,
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}
