//! Push delivery's data between the contract and the API's JSON, as
//! [`wire`](crate::wire) does for the rest: a task's target, a queue's
//! settings.

use std::sync::Arc;

use hourglass_queue::{limits, Flow, HttpMethod, HttpTarget, PushTarget, QueueSettings};
use hourglass_wire as w;

use crate::error::ApiError;

/// A target as the API takes it: its method named (`POST` if not), its
/// headers in name order.
pub(crate) fn http_target(
    url: String,
    method: Option<String>,
    headers: impl IntoIterator<Item = (String, String)>,
) -> Result<HttpTarget, ApiError> {
    let method = match method {
        Some(name) => name.parse::<HttpMethod>().map_err(ApiError::invalid)?,
        None => HttpMethod::Post,
    };
    let headers = headers.into_iter().map(|(name, value)| (name.into_boxed_str(), value.into_boxed_str())).collect();
    Ok(HttpTarget { url: url.into(), method, headers })
}

/// A task's own target, as the backend takes it.
pub(crate) fn task_target(target: w::HttpTarget) -> Result<HttpTarget, ApiError> {
    http_target(target.url, target.method, target.headers)
}

/// A target as the API shows it.
pub(crate) fn wire_target(target: &HttpTarget) -> w::HttpTarget {
    w::HttpTarget {
        url: target.url.to_string(),
        method: Some(target.method.as_str().to_owned()),
        headers: target.headers.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect(),
    }
}

/// A queue's settings, as the backend takes them.
pub(crate) fn settings(settings: w::QueueSettings) -> Result<QueueSettings, ApiError> {
    let push = match settings.push {
        None => None,
        Some(push) => {
            let http = http_target(push.url, push.method, push.headers)?;
            let timeout_ms = push.timeout_ms.unwrap_or(limits::PUSH_TIMEOUT_MS_DEFAULT);
            Some(Arc::new(PushTarget { http, timeout_ms }))
        }
    };
    let flow = Flow { rate_per_s: settings.rate_per_s, burst: settings.burst, max_in_flight: settings.max_in_flight };
    Ok(QueueSettings { push, flow })
}

/// A queue's settings as the API shows them.
pub(crate) fn wire_settings(settings: &QueueSettings) -> w::QueueSettings {
    let push = settings.push.as_deref().map(|push| {
        let http = wire_target(&push.http);
        w::PushTarget { url: http.url, method: http.method, headers: http.headers, timeout_ms: Some(push.timeout_ms) }
    });
    let flow = &settings.flow;
    w::QueueSettings { push, rate_per_s: flow.rate_per_s, burst: flow.burst, max_in_flight: flow.max_in_flight }
}
