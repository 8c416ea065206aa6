//! Push delivery: a due task calls its HTTP target.
//!
//! A [`Deliverer`] claims push tasks (of a queue with a push target, or with
//! an `http` target of their own) from a [`Source`], sends each with a
//! [`PushClient`], and settles the outcome. [`TasksSource`] is the source
//! over any backend of the contract (its push claims, acks and nacks). This
//! crate knows the contract (`hourglass-queue`), no backend and no server.
//!
//! ```no_run
//! # async fn demo(backend: std::sync::Arc<dyn hourglass_queue::Backend>) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use hourglass_push::{AllowList, Deliverer, PushClient, SigningKeys, TasksSource};
//!
//! let client = PushClient::builder()
//!     .keys(SigningKeys::parse_list("old-key-0123456789,new-key-0123456789")?)
//!     .allow(AllowList::parse(["hooks.internal:8443"])?)
//!     .build()?;
//! let running = Deliverer::new(Arc::new(TasksSource::new(backend)), client).concurrency(64).start();
//! // ... on shutdown: stop claiming, let requests in flight finish for 30 s.
//! running.stop(Duration::from_secs(30)).await;
//! # Ok(()) }
//! ```
//!
//! # The rules
//! - **The request** ([`Outgoing`]): the target's method and URL; the body is
//!   the payload's bytes as stored (`Content-Type: application/json` if they
//!   are JSON text, else `application/octet-stream`); headers `Hourglass-Task-Id`, `Hourglass-Queue`,
//!   `Hourglass-Attempt` (from 1), `Hourglass-Due-At` (Unix ms), then the
//!   target's own ([`HttpTarget`]: never `Hourglass-*` or framing headers,
//!   as the contract checks at enqueue).
//! - **Signatures** ([`SigningKeys`]): with keys,
//!   `Hourglass-Signature: t=<Unix ms>,v1=<hex>[,v1=<hex>]`, one `v1` per key,
//!   each the HMAC-SHA256 under that key of `<t>.` followed by the body. Two
//!   keys rotate without a gap. Keys are secrets: their `Debug` is redacted
//!   and nothing here logs them.
//! - **Outbound safety** ([`outbound`]): unless the [`AllowList`]
//!   (`HOST[:PORT]`, `*` for any) opens a host, a target whose address is
//!   loopback, private, link-local, unspecified, shared (CGNAT), multicast,
//!   broadcast, documentation, benchmarking or reserved (IPv6 forms
//!   included, v4-mapped ones judged as IPv4) is refused. The check is on the
//!   address connected to: IP literals as written, names in the client's own
//!   resolver, so DNS rebinding does not get through. No proxy, no
//!   redirects. A refusal is a dead task with the reason; the API refuses
//!   what it can at enqueue with [`Outbound::check_url`].
//! - **The client** ([`PushClient`]): reqwest on rustls (no OpenSSL),
//!   connections kept alive and reused, redirects not followed, response
//!   bodies read up to [`RESPONSE_BODY_BYTES_MAX`](limits::RESPONSE_BODY_BYTES_MAX),
//!   each request bounded by its target's timeout (default
//!   [`PUSH_TIMEOUT_MS_DEFAULT`](hourglass_queue::limits::PUSH_TIMEOUT_MS_DEFAULT), at most
//!   [`PUSH_TIMEOUT_MS_MAX`](hourglass_queue::limits::PUSH_TIMEOUT_MS_MAX)).
//! - **Outcomes** ([`Outcome`]): 2xx done; 410 dead now; 429 or 503 with
//!   `Retry-After` (seconds or an HTTP date) due again then, at most
//!   [`PUSH_RETRY_AFTER_MS_MAX`](hourglass_queue::limits::PUSH_RETRY_AFTER_MS_MAX) away; anything else,
//!   a timeout or a connection failure a failed attempt with `last_error`
//!   (`HTTP 500: <first bytes of the body>`, `timeout after 500 ms`,
//!   `connection refused by host:port`), at most
//!   [`LAST_ERROR_BYTES_MAX`](limits::LAST_ERROR_BYTES_MAX) bytes.
//! - **The loop** ([`Deliverer`]): at most `concurrency` requests in flight
//!   per node; each task leased for its timeout plus
//!   [`PUSH_LEASE_MARGIN_MS`](hourglass_queue::limits::PUSH_LEASE_MARGIN_MS), so a node that dies
//!   mid-delivery leaves it to be delivered again (at least once;
//!   `Hourglass-Task-Id` lets receivers deduplicate); outcomes that end
//!   while a settle is under way settled together as soon as it returns
//!   ([`Source::settle_batch`]: one ack request a shard on Redis); a
//!   graceful stop;
//!   [`PushMetrics`]: deliveries by outcome and lateness from due time to
//!   request sent.
#![deny(missing_docs)]

mod client;
mod contract;
mod deliver;
pub mod limits;
mod metrics;
pub mod outbound;
mod outcome;
mod request;
mod retry_after;
mod settle;
mod signature;
mod source;

pub use client::{PushClient, PushClientBuilder, Sent};
pub use contract::TasksSource;
pub use deliver::{Deliverer, Running, StopReport};
pub use hourglass_queue::{HttpMethod, HttpTarget, PushTarget};
pub use metrics::{PushCounts, PushMetrics};
pub use outbound::{AllowList, Outbound, Refusal};
pub use outcome::{Answer, Outcome, OutcomeKind};
pub use request::{BadTarget, Outgoing, ATTEMPT_HEADER, DUE_AT_HEADER, QUEUE_HEADER, TASK_ID_HEADER};
pub use retry_after::retry_after_ms;
pub use signature::{KeyError, SigningKey, SigningKeys, VerifyError, SIGNATURE_HEADER};
pub use source::{Delivery, Source};

/// A certificate to trust, for [`PushClientBuilder::root_certificate`].
pub use reqwest::Certificate;
