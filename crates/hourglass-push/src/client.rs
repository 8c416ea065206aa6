//! The HTTP client of push delivery: one per node, its connections kept
//! alive and reused across deliveries.

use std::sync::Arc;
use std::time::Duration;

use hourglass_queue::{SystemWallClock, WallClock};
use reqwest::header::{LOCATION, RETRY_AFTER};
use reqwest::redirect;

use crate::limits::{ERROR_BODY_BYTES_MAX, POOL_IDLE_MS, RESPONSE_BODY_BYTES_MAX};
use crate::outbound::{AllowList, GuardedResolver, Lookup, Outbound, SystemLookup};
use crate::outcome::{Answer, Outcome};
use crate::request::Outgoing;
use crate::signature::SigningKeys;
use crate::source::Delivery;

/// Sends deliveries and tells their [`Outcome`]. HTTP/1.1 over TCP or TLS
/// (rustls, with the Mozilla roots built in; no OpenSSL), no proxy,
/// redirects not followed, a response body read up to
/// [`RESPONSE_BODY_BYTES_MAX`] (within it the connection goes back to the
/// pool), each request bounded by its target's timeout.
///
/// Two connection pools: one behind the [`GuardedResolver`], for every host
/// the allow list does not open, and one that resolves without a check, for
/// those it does. A pool is keyed by host and port, so a connection made for
/// an allowed host is never reused for another.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use hourglass_push::{AllowList, Delivery, PushClient, SigningKeys};
/// use hourglass_queue::{HttpTarget, PushTarget};
///
/// let client = PushClient::builder()
///     .allow(AllowList::parse(["127.0.0.1:8080"])?)
///     .keys(SigningKeys::parse_list("a-key-of-16-bytes-or-more")?)
///     .build()?;
/// let delivery = Delivery {
///     task_id: 1,
///     queue: "orders".into(),
///     attempt: 1,
///     due_at_ms: 0,
///     payload: "{}".into(),
///     target: Arc::new(PushTarget::new(HttpTarget::post("http://127.0.0.1:8080/hook"))),
///     ticket: (),
/// };
/// println!("{:?}", client.send(&delivery).await.outcome);
/// # Ok(()) }
/// ```
pub struct PushClient {
    guarded: reqwest::Client,
    open: reqwest::Client,
    outbound: Outbound,
    keys: SigningKeys,
    clock: Arc<dyn WallClock>,
}

impl std::fmt::Debug for PushClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushClient").field("outbound", &self.outbound).field("keys", &self.keys).finish_non_exhaustive()
    }
}

/// What [`PushClient::builder`] sets up.
pub struct PushClientBuilder {
    allow: AllowList,
    keys: SigningKeys,
    clock: Arc<dyn WallClock>,
    lookup: Arc<dyn Lookup>,
    idle_per_host: usize,
    roots: Vec<reqwest::Certificate>,
}

/// One delivery's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// What to do with the task.
    pub outcome: Outcome,
    /// When the request was handed to the connection, Unix µs (the
    /// signature's `t`, in ms): lateness counts to it. `None` if it was
    /// refused before.
    pub sent_at_us: Option<u64>,
}

impl PushClientBuilder {
    /// Hosts opened whatever their addresses (none by default).
    pub fn allow(mut self, allow: AllowList) -> Self {
        self.allow = allow;
        self
    }

    /// Keys to sign with (none by default: requests go unsigned).
    pub fn keys(mut self, keys: SigningKeys) -> Self {
        self.keys = keys;
        self
    }

    /// The clock of signatures and `Retry-After` dates (the system's by default).
    pub fn clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.clock = clock;
        self
    }

    /// How names are resolved, before the guard (the system's resolver by
    /// default).
    pub fn lookup(mut self, lookup: Arc<dyn Lookup>) -> Self {
        self.lookup = lookup;
        self
    }

    /// Idle connections kept per host: the node's concurrency bound is enough.
    pub fn idle_per_host(mut self, idle_per_host: usize) -> Self {
        self.idle_per_host = idle_per_host;
        self
    }

    /// Trusts `root` as well as the Mozilla roots built in: for receivers
    /// behind a private certificate authority.
    pub fn root_certificate(mut self, root: reqwest::Certificate) -> Self {
        self.roots.push(root);
        self
    }

    /// The client. Fails only if TLS cannot be set up.
    pub fn build(self) -> Result<PushClient, reqwest::Error> {
        let http = |resolver: GuardedResolver| {
            let builder =
                self.roots.iter().cloned().fold(reqwest::Client::builder(), |b, root| b.add_root_certificate(root));
            builder
                .user_agent(concat!("hourglass/", env!("CARGO_PKG_VERSION")))
                .redirect(redirect::Policy::none())
                .no_proxy()
                .dns_resolver(Arc::new(resolver))
                .tcp_nodelay(true)
                .pool_idle_timeout(Duration::from_millis(POOL_IDLE_MS))
                .pool_max_idle_per_host(self.idle_per_host)
                .use_rustls_tls()
                .build()
        };
        Ok(PushClient {
            guarded: http(GuardedResolver::guarding(self.lookup.clone()))?,
            open: http(GuardedResolver::open(self.lookup.clone()))?,
            outbound: Outbound::new(self.allow),
            keys: self.keys,
            clock: self.clock,
        })
    }
}

impl PushClient {
    /// A builder: no allow list, no keys, the system's clock and resolver.
    pub fn builder() -> PushClientBuilder {
        PushClientBuilder {
            allow: AllowList::none(),
            keys: SigningKeys::none(),
            clock: Arc::new(SystemWallClock),
            lookup: Arc::new(SystemLookup),
            idle_per_host: crate::limits::CONCURRENCY_DEFAULT,
            roots: Vec::new(),
        }
    }

    /// The outbound rules, for checks at enqueue.
    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }

    /// Sends `delivery` to its target and tells the outcome.
    pub async fn send<T>(&self, delivery: &Delivery<T>) -> Sent {
        let sent_at_us = self.clock.now_us();
        let request = match Outgoing::build(delivery, &self.keys, sent_at_us / 1_000) {
            Ok(request) => request,
            Err(bad) => return Sent { outcome: Outcome::dead(bad.to_string()), sent_at_us: None },
        };
        let client = if self.outbound.allows(&request.url) {
            &self.open
        } else if let Err(refusal) = self.outbound.check_url(&request.url) {
            // An IP literal never reaches the resolver: it is checked here.
            return Sent { outcome: Outcome::refused(&refusal), sent_at_us: None };
        } else {
            &self.guarded
        };
        let timeout_ms = request.timeout_ms;
        let response = client
            .request(request.method, request.url)
            .headers(request.headers)
            .body(request.body)
            .timeout(Duration::from_millis(timeout_ms))
            .send()
            .await;
        let outcome = match response {
            Ok(response) => self.answer(response).await,
            Err(error) => Outcome::of_error(&error, timeout_ms),
        };
        Sent { outcome, sent_at_us: Some(sent_at_us) }
    }

    /// The outcome of a response, its body read up to the bound.
    async fn answer(&self, mut response: reqwest::Response) -> Outcome {
        let status = response.status().as_u16();
        let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (retry_after, location) = (header(RETRY_AFTER), header(LOCATION));
        let mut body = Vec::new();
        let mut read = 0;
        // A body that ends within the bound returns its connection to the
        // pool; a longer one, or one cut by an error or the timeout, is
        // dropped with its connection. The status stands either way.
        while read < RESPONSE_BODY_BYTES_MAX {
            let Ok(Some(chunk)) = response.chunk().await else { break };
            read += chunk.len();
            let room = ERROR_BODY_BYTES_MAX.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        let answer = Answer { status, retry_after: retry_after.as_deref(), location: location.as_deref(), body: &body };
        Outcome::of_answer(&answer, self.clock.now_ms())
    }
}
