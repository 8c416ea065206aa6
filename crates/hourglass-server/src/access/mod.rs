//! Who may do what: bearer tokens, each holding permissions on the queues
//! its patterns match.
//!
//! - `pattern`: a queue pattern (`*` the only wildcard) and its matcher;
//! - `file`: the `--tokens` file read into [`Grant`]s, with its limits;
//! - `keys`: the tokens a server knows (`--token`, the file, reloaded on
//!   SIGHUP), and who a request's bearer token is;
//! - `need`: what each route needs (the table is in
//!   `routes.rs`) and the guard that checks it before the
//!   handler runs;
//! - `listing`: listings across queues as a token sees them;
//! - `redact`: push targets' header values, hidden from a token that may
//!   not change them.
//!
//! Permissions are checked in one place per request: the guard, against
//! the queue the route touches (from its path, or the task's or schedule's
//! queue). Three kinds of route need their handler's help, and the table
//! says which: listings across queues (shown only the permitted queues),
//! acks carried in a body (each task's queue), and a schedule's body (the
//! queue it enqueues into). A schedule's name, unlike a task's id, may be
//! made again in another queue after the guard's check: the guard hands
//! what it checked to the handler (`Checked`), whose change the engine
//! makes only on that schedule, and a `GET` checks the schedule it read.

mod file;
mod keys;
mod listing;
mod need;
mod pattern;
mod redact;

use std::fmt;
use std::sync::Arc;

pub use file::{TokenFileError, FILE_BYTES_MAX, NAME_BYTES_MAX, OPEN_NAME, PATTERNS_MAX, ROOT_NAME, TOKENS_MAX};
pub(crate) use keys::bearer;
#[cfg(unix)]
pub use keys::reload_on_hangup;
pub use keys::Keys;
pub(crate) use need::{guard, Checked, Need};
pub use pattern::{Pattern, PATTERN_BYTES_MAX};
pub use redact::HIDDEN;

use crate::error::ApiError;

/// What a token may do, on its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Every `GET`, and the dashboard read-only.
    Read,
    /// Create tasks and batches.
    Enqueue,
    /// Claim, ack, nack, extend; beanstalkd's reserve, delete, release,
    /// bury and touch.
    Consume,
    /// Cancel, reschedule, retry, pause, delete the dead, schedules and
    /// queue settings.
    Manage,
    /// Everything.
    Admin,
}

impl Permission {
    /// Every permission, in the order the file's documentation lists them.
    pub const ALL: [Permission; 5] =
        [Permission::Read, Permission::Enqueue, Permission::Consume, Permission::Manage, Permission::Admin];

    /// Its name in the file and in answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Enqueue => "enqueue",
            Permission::Consume => "consume",
            Permission::Manage => "manage",
            Permission::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One token's name, queue patterns and permissions. The token itself is
/// not kept, only its digest, in [`Keys`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    name: Box<str>,
    queues: Vec<Pattern>,
    can: u8,
}

impl Grant {
    /// A grant of `can` on the queues `queues` match.
    pub fn new(name: &str, queues: Vec<Pattern>, can: &[Permission]) -> Grant {
        Grant { name: name.into(), queues, can: can.iter().fold(0, |bits, p| bits | p.bit()) }
    }

    /// Everything, on every queue: `--token`'s grant, and a server's without
    /// tokens.
    pub fn admin(name: &str) -> Grant {
        Grant::new(name, vec![Pattern::new("*").expect("a valid pattern")], &[Permission::Admin])
    }

    /// The token's name, as its file gives it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its queue patterns.
    pub fn queues(&self) -> &[Pattern] {
        &self.queues
    }

    /// Whether it holds `permission` (on some queue): `admin` holds all.
    pub fn holds(&self, permission: Permission) -> bool {
        self.can & (permission.bit() | Permission::Admin.bit()) != 0
    }

    /// The permissions it holds, `admin` standing for all.
    pub fn permissions(&self) -> Vec<Permission> {
        Permission::ALL.into_iter().filter(|&p| self.can & p.bit() != 0).collect()
    }

    /// Whether it may do `permission` in `queue`.
    pub fn allows(&self, permission: Permission, queue: &str) -> bool {
        self.holds(permission) && self.queues.iter().any(|p| p.matches(queue))
    }

    /// The permissions it holds in `queue`, `admin` spelt out as the four it
    /// holds: what the dashboard offers there.
    pub fn permissions_in(&self, queue: &str) -> Vec<Permission> {
        if !self.queues.iter().any(|p| p.matches(queue)) {
            return Vec::new();
        }
        Permission::ALL.into_iter().filter(|&p| p != Permission::Admin && self.holds(p)).collect()
    }

    /// Whether it may do `permission` in every queue, those to come
    /// included: what server-wide figures need.
    pub fn everywhere(&self, permission: Permission) -> bool {
        self.holds(permission) && self.queues.iter().any(Pattern::is_every_queue)
    }

    /// `Ok` if it may do `permission` in `queue`, a queue the request
    /// names, else 403 `forbidden` naming both.
    pub(crate) fn require(&self, permission: Permission, queue: &str) -> Result<(), ApiError> {
        if self.allows(permission, queue) {
            return Ok(());
        }
        Err(ApiError::forbidden(permission, Some(queue)))
    }

    /// As [`Grant::require`], for a queue the server looked up (a task's, a
    /// schedule's): the refusal names it only if the token may see it, so
    /// that a task's id does not tell another team's queue names.
    pub(crate) fn require_found(&self, permission: Permission, queue: &str) -> Result<(), ApiError> {
        if self.allows(permission, queue) {
            return Ok(());
        }
        let seen = Permission::ALL.iter().any(|&p| self.allows(p, queue));
        Err(ApiError::forbidden(permission, seen.then_some(queue)))
    }

    /// `Ok` if it holds `permission` on some queue, else 403 `forbidden`.
    pub(crate) fn require_somewhere(&self, permission: Permission) -> Result<(), ApiError> {
        if self.holds(permission) {
            Ok(())
        } else {
            Err(ApiError::forbidden(permission, None))
        }
    }
}

/// The grant of the request's token, put in the request's extensions by
/// the guard for the handlers that filter or check further.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub(crate) Arc<Grant>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Caller, ApiError> {
        // The guard runs before every handler; a request without it is a
        // router built wrong.
        parts.extensions.get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(queues: &[&str], can: &[Permission]) -> Grant {
        Grant::new("t", queues.iter().map(|q| Pattern::new(q).unwrap()).collect(), can)
    }

    #[test]
    fn a_grant_allows_its_permissions_on_its_queues_only() {
        let g = grant(&["billing-*", "audit"], &[Permission::Enqueue, Permission::Read]);
        assert!(g.allows(Permission::Enqueue, "billing-eu") && g.allows(Permission::Read, "audit"));
        assert!(!g.allows(Permission::Consume, "billing-eu"), "not granted");
        assert!(!g.allows(Permission::Enqueue, "mail"), "not its queue");
        assert!(!g.everywhere(Permission::Read));
        assert_eq!(g.permissions(), [Permission::Read, Permission::Enqueue]);
        assert_eq!(g.permissions_in("billing-eu"), [Permission::Read, Permission::Enqueue]);
        assert_eq!(g.permissions_in("mail"), []);
    }

    #[test]
    fn admin_holds_every_permission_on_its_queues() {
        let g = grant(&["billing-*"], &[Permission::Admin]);
        assert!(Permission::ALL.iter().all(|&p| g.allows(p, "billing-x")));
        assert!(!g.allows(Permission::Read, "mail") && !g.everywhere(Permission::Read));
        let four = [Permission::Read, Permission::Enqueue, Permission::Consume, Permission::Manage];
        assert_eq!(g.permissions_in("billing-x"), four, "admin spelt out");
        let root = Grant::admin("--token");
        assert!(Permission::ALL.iter().all(|&p| root.everywhere(p) && root.allows(p, "any/queue")));
    }

    #[test]
    fn a_refusal_names_the_permission_and_only_a_queue_the_token_sees() {
        let g = grant(&["billing-*"], &[Permission::Read]);
        let seen = g.require(Permission::Consume, "billing-eu").unwrap_err();
        assert_eq!((seen.status().as_u16(), seen.code()), (403, "forbidden"));
        assert!(seen.message().contains("consume") && seen.message().contains("billing-eu"), "{seen}");
        let named = g.require(Permission::Consume, "payroll").unwrap_err();
        assert!(named.message().contains("payroll"), "the request named it: {named}");
        let unseen = g.require_found(Permission::Consume, "payroll").unwrap_err();
        assert!(unseen.message().contains("consume") && !unseen.message().contains("payroll"), "{unseen}");
    }
}
