//! Push delivery's data: where a task is sent ([`HttpTarget`]), a queue's
//! target for every task it holds ([`PushTarget`]), and the rule that says
//! which tasks are delivered by push ([`Delivery`]).
//!
//! A task is delivered by push when it has its own [`HttpTarget`] or its
//! queue has a [`PushTarget`]; pull claims never receive such a task, and
//! push claims (the delivery loop's) receive only those. The HTTP exchange
//! itself (the request, signatures, outbound rules, outcomes) is not this
//! crate's: a push claim hands out each task with its target resolved
//! ([`Claimed::target`](crate::Claimed::target)), and the outcome comes back
//! as an ack or a [`Nack`](crate::Nack).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::limits::PUSH_TIMEOUT_MS_DEFAULT;

/// The HTTP methods a target may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HttpMethod {
    /// `GET`.
    Get,
    /// `POST`, the default.
    #[default]
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

impl HttpMethod {
    /// Every method, in the order of their codes ([`code`](HttpMethod::code)).
    pub const ALL: [HttpMethod; 5] =
        [HttpMethod::Get, HttpMethod::Post, HttpMethod::Put, HttpMethod::Patch, HttpMethod::Delete];

    /// Its name as HTTP spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }

    /// A small number that stands for it in stored records: its place in
    /// [`ALL`](HttpMethod::ALL).
    pub fn code(self) -> u8 {
        Self::ALL.iter().position(|&m| m == self).expect("every method is in ALL") as u8
    }

    /// The method a stored [`code`](HttpMethod::code) stands for.
    pub fn from_code(code: u8) -> Option<HttpMethod> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HttpMethod {
    type Err = String;

    /// A method's name, in capitals as HTTP spells it.
    fn from_str(name: &str) -> Result<HttpMethod, String> {
        Self::ALL.into_iter().find(|m| m.as_str() == name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|m| m.as_str()).collect();
            format!("method must be {}, not {name:?}", names.join(" or "))
        })
    }
}

/// An HTTP request a task is delivered as: its body is the task's payload.
/// Checked by [`validate::http_target`](crate::validate::http_target).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpTarget {
    /// An `http` or `https` URL.
    pub url: Box<str>,
    /// The method.
    pub method: HttpMethod,
    /// Headers sent with every delivery, in order, besides the ones
    /// hourglass sets (`Hourglass-*`, `Content-Type`).
    pub headers: Vec<(Box<str>, Box<str>)>,
}

impl HttpTarget {
    /// A `POST` to `url` with no headers of its own.
    pub fn post(url: impl Into<Box<str>>) -> HttpTarget {
        HttpTarget { url: url.into(), method: HttpMethod::Post, headers: Vec::new() }
    }

    /// Bytes of text it holds (URL, header names and values): what it costs
    /// a task's budgets, and what the stored record spends on it.
    pub fn text_bytes(&self) -> usize {
        self.url.len() + self.headers.iter().map(|(name, value)| name.len() + value.len()).sum::<usize>()
    }
}

/// A queue's push target: where each of its tasks without a target of its
/// own is delivered, and how long a delivery may take.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PushTarget {
    /// The request.
    pub http: HttpTarget,
    /// How long a delivery may take before it is a failed attempt: within
    /// [`PUSH_TIMEOUT_MS_MIN`](crate::limits::PUSH_TIMEOUT_MS_MIN) to
    /// [`PUSH_TIMEOUT_MS_MAX`](crate::limits::PUSH_TIMEOUT_MS_MAX), by
    /// default [`PUSH_TIMEOUT_MS_DEFAULT`].
    pub timeout_ms: u32,
}

impl PushTarget {
    /// `http` with the default timeout.
    pub fn new(http: HttpTarget) -> PushTarget {
        PushTarget { http, timeout_ms: PUSH_TIMEOUT_MS_DEFAULT }
    }

    /// Where a push claim sends a task: its own target (with the queue's
    /// timeout, or the default one), else the queue's; `None` if it is
    /// delivered by pull. The one place [`Delivery`] is decided.
    pub fn resolve(own: Option<&Arc<HttpTarget>>, queue: Option<&Arc<PushTarget>>) -> Option<Arc<PushTarget>> {
        match (own, queue) {
            (Some(own), queue) => {
                let timeout_ms = queue.map_or(PUSH_TIMEOUT_MS_DEFAULT, |queue| queue.timeout_ms);
                Some(Arc::new(PushTarget { http: HttpTarget::clone(own), timeout_ms }))
            }
            (None, queue) => queue.cloned(),
        }
    }

    /// The lease a delivery to it holds: its timeout and
    /// [`PUSH_LEASE_MARGIN_MS`](crate::limits::PUSH_LEASE_MARGIN_MS), so that
    /// a delivery that times out is settled before anyone else may take it.
    pub fn lease_ms(&self) -> u64 {
        u64::from(self.timeout_ms) + crate::limits::PUSH_LEASE_MARGIN_MS
    }
}

/// How a task is delivered, and which claims take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Delivery {
    /// To a consumer that claims it: pull claims (the API's, beanstalkd's).
    #[default]
    Pull,
    /// As an HTTP request: the delivery loop's push claims.
    Push,
}

impl Delivery {
    /// How a task is delivered: by push if it has a target of its own
    /// (`own_target`) or its queue has one (`queue_pushes`).
    pub fn of(own_target: bool, queue_pushes: bool) -> Delivery {
        if own_target || queue_pushes {
            Delivery::Push
        } else {
            Delivery::Pull
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_by_name_and_code() {
        for method in HttpMethod::ALL {
            assert_eq!(method.as_str().parse::<HttpMethod>(), Ok(method));
            assert_eq!(HttpMethod::from_code(method.code()), Some(method));
        }
        assert!("post".parse::<HttpMethod>().unwrap_err().contains("GET or POST"));
        assert_eq!(HttpMethod::from_code(5), None);
    }

    #[test]
    fn a_task_s_own_target_wins_with_the_queue_s_timeout() {
        let own = Arc::new(HttpTarget::post("https://a.example/"));
        let queue = Arc::new(PushTarget { http: HttpTarget::post("https://q.example/"), timeout_ms: 500 });
        let resolved = PushTarget::resolve(Some(&own), Some(&queue)).unwrap();
        assert_eq!((&*resolved.http.url, resolved.timeout_ms), ("https://a.example/", 500));
        assert_eq!(PushTarget::resolve(Some(&own), None).unwrap().timeout_ms, PUSH_TIMEOUT_MS_DEFAULT);
        assert_eq!(PushTarget::resolve(None, Some(&queue)), Some(queue.clone()));
        assert_eq!(PushTarget::resolve(None, None), None);
        assert_eq!(Delivery::of(false, false), Delivery::Pull);
        assert_eq!(Delivery::of(true, false), Delivery::Push);
        assert_eq!(Delivery::of(false, true), Delivery::Push);
    }
}
