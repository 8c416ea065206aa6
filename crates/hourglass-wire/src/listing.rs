//! Listings of a queue's tasks, a page at a time.

use serde::{Deserialize, Serialize};

use crate::task::Task;
use crate::text::{Cursor, State};

/// The query of `GET /v1/queues/{queue}/tasks` and `/dead`:
/// `?state=due&after=CURSOR&limit=N`.
///
/// `state` and `after` are the texts of a [`State`] and a [`Cursor`]: the
/// server reads them, so that a wrong one is a 400 `invalid` that says what
/// is expected.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only tasks in this state (all if left out; not with `/dead`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The page after this cursor: the previous page's `next`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Tasks at most (100 if left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl ListQuery {
    /// A page of tasks in `state` (all if `None`) after `after`, at most `limit`.
    pub fn page(state: Option<State>, after: Option<Cursor>, limit: Option<usize>) -> ListQuery {
        ListQuery {
            state: state.map(|state| state.name().to_owned()),
            after: after.map(|cursor| cursor.to_string()),
            limit,
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskPage {
    /// The tasks, in the listing's order.
    pub tasks: Vec<Task>,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<Cursor>,
}
