//! The API's extractors: axum's [`Path`](axum::extract::Path),
//! [`Json`](axum::Json) and [`Query`](axum::extract::Query), each with the
//! API's error as its rejection, so that handlers take plain arguments and a
//! request that does not fit is answered like every other error (codes
//! `invalid_path`, `invalid_json`, `payload_too_large`,
//! `unsupported_media_type`, `invalid_query`).
//!
//! As axum's `customize-extractor-error` example does with
//! `#[derive(FromRequest)] #[from_request(via(axum::Json), rejection(ApiError))]`,
//! written out (a few lines each) rather than derived, which would build the
//! `axum-macros` proc-macro crate for three impls.

use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::ApiError;

/// A JSON body, or the answer `invalid_json` (400 or 422),
/// `payload_too_large` (413), `unsupported_media_type` (415) or, for a body
/// that did not arrive within the body timeout, `request_timeout` (408). As an
/// answer, the value as JSON.
pub(crate) struct Json<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Json<T>, ApiError> {
        // The common case, `application/json` exactly, skips axum's parse of
        // the media type and parses with serde_json alone: a body that does
        // not parse is parsed again by axum, whose rejection names the field
        // at fault, so every answer is axum's (BENCHMARKS.md, "What the
        // connection deadlines cost, found and fixed").
        if request.headers().get(header::CONTENT_TYPE).is_some_and(|value| value.as_bytes() == b"application/json") {
            let bytes = Bytes::from_request(request, state).await.map_err(JsonRejection::from)?;
            if let Ok(value) = serde_json::from_slice(&bytes) {
                return Ok(Json(value));
            }
            let axum::Json(value) = axum::Json::<T>::from_bytes(&bytes)?;
            return Ok(Json(value));
        }
        let axum::Json(value) = axum::Json::<T>::from_request(request, state).await?;
        Ok(Json(value))
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// The route's path parameters, or the answer 400 `invalid_path`.
pub(crate) struct Path<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Path<T>, ApiError> {
        let axum::extract::Path(value) = axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(Path(value))
    }
}

/// The query string, or the answer 400 `invalid_query`.
pub(crate) struct Query<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Query<T>, ApiError> {
        let axum::extract::Query(value) = axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(Query(value))
    }
}
