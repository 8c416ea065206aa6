//! Push delivery: a task's HTTP target, and a queue's settings (its push
//! target and flow control), `PUT` and `GET /v1/queues/{queue}/settings`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A task's own HTTP target (`"http"` of [`NewTask`](crate::NewTask) and
/// [`Task`](crate::Task)): the task is delivered by push, as this request,
/// its payload the body.
///
/// ```
/// use hourglass_wire::HttpTarget;
///
/// let target: HttpTarget = serde_json::from_str(r#"{"url": "https://example.com/hook"}"#).unwrap();
/// assert_eq!((target.url.as_str(), target.method.as_deref()), ("https://example.com/hook", None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HttpTarget {
    /// An `http` or `https` URL.
    pub url: String,
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`; `POST` if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Headers sent with every delivery, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A queue's push target (`"push"` of [`QueueSettings`]): where every task
/// of the queue without a target of its own is delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PushTarget {
    /// An `http` or `https` URL.
    pub url: String,
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`; `POST` if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Headers sent with every delivery, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long a delivery may take; 30 s if left out, at most 30 min.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u32>,
}

/// `PUT /v1/queues/{queue}/settings` and its answer, and `GET` the same: a
/// queue's settings, replaced whole by a put (a field left out is unset).
///
/// ```
/// use hourglass_wire::QueueSettings;
///
/// let put: QueueSettings = serde_json::from_str(
///     r#"{"push": {"url": "https://example.com/hook", "timeout_ms": 5000}, "rate_per_s": 50, "max_in_flight": 10}"#,
/// )
/// .unwrap();
/// assert_eq!((put.rate_per_s, put.burst, put.max_in_flight), (Some(50.0), None, Some(10)));
/// assert_eq!(serde_json::to_string(&QueueSettings::default()).unwrap(), r#"{"push":null}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct QueueSettings {
    /// The queue's push target, or `null`: a queue with one delivers every
    /// task by push unless the task has its own `http`.
    #[serde(default)]
    pub push: Option<PushTarget>,
    /// Tasks handed out a second, on average: a token bucket's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// The token bucket's size (with a rate): the most handed out at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Tasks held at once, at most, by pull claims and push deliveries
    /// together, across every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
}
