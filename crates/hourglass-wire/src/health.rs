//! `GET /healthz`.

use serde::{Deserialize, Serialize};

/// The answer to `GET /healthz`: the server is up and answering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok`.
    pub status: String,
}

impl Health {
    /// The answer of a server that is up.
    pub fn ok() -> Health {
        Health { status: "ok".to_owned() }
    }
}
