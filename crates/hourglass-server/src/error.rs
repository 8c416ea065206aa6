//! Errors as the API shows them: `{"error": {"code": "...", "message": "..."}}`
//! with a 4xx status (5xx only for storage failures), never internals.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hourglass_queue::QueueError;
use serde_json::json;

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with an explicit status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    /// A malformed request: 400 `invalid`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// A missing or wrong bearer token.
    pub fn unauthorized() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid bearer token is required")
    }

    /// A route that does not exist.
    pub fn no_route() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such endpoint")
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
            QueueError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            QueueError::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
            QueueError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError { status, code: error.code(), message: error.to_string() }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        let status = rejection.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "invalid_json",
        };
        ApiError::new(
            if status.is_client_error() { status } else { StatusCode::BAD_REQUEST },
            code,
            rejection.body_text(),
        )
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // A server's failure; 501 is the request's (an operation this backend lacks).
        if self.status.is_server_error() && self.status != StatusCode::NOT_IMPLEMENTED {
            tracing::error!(code = self.code, message = %self.message, "request failed");
        }
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, Json(body)).into_response()
    }
}
