//! `GET /healthz`.

use serde::{Deserialize, Serialize};

/// The answer to `GET /healthz`: `ok` (200) from a server that is up and
/// reaches its store; `store_unavailable` (503), with the reason, from one
/// that cannot reach its store (not yet, or not any more).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok` or `store_unavailable`.
    pub status: String,
    /// Why the store cannot be reached: its address and the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Health {
    /// The answer of a server that is up.
    pub fn ok() -> Health {
        Health { status: "ok".to_owned(), reason: None }
    }

    /// The answer of a server that cannot reach its store, and why.
    pub fn store_unavailable(reason: impl Into<String>) -> Health {
        Health { status: "store_unavailable".to_owned(), reason: Some(reason.into()) }
    }
}

/// Who the request's token is and what it may do (`GET /v1/whoami`): the
/// dashboard hides the actions it cannot take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Whoami {
    /// The token's name in the token file; `--token` for the server's one
    /// admin token, `anonymous` on a server without tokens.
    pub name: String,
    /// Its permissions, of `read`, `enqueue`, `consume`, `manage`, `admin`
    /// (`admin` holds the others).
    pub can: Vec<String>,
    /// The queues they hold on, as patterns: `*` matches any run of
    /// characters, every other character itself.
    pub queues: Vec<String>,
}
