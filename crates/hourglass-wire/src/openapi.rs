//! Schemas of the text forms ([`text`](crate::text)), which serde writes by
//! hand and `utoipa` cannot derive: each is a string, with the pattern or
//! the names it may take. The other types derive theirs (feature `openapi`).

use std::borrow::Cow;

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use crate::text::{Cursor, DeadReason, Lease, Misfire, Overlap, State, LEASE_DIGITS};

/// A string schema with `description` and, if given, `pattern`.
fn string(description: &str, pattern: Option<String>) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).description(Some(description)).pattern(pattern)
}

impl PartialSchema for Lease {
    fn schema() -> RefOr<Schema> {
        let pattern = format!("^[0-9a-fA-F]{{{LEASE_DIGITS}}}$");
        string("A delivery's lease token: 16 hex digits.", Some(pattern)).into()
    }
}

impl ToSchema for Lease {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Lease")
    }
}

impl PartialSchema for Cursor {
    fn schema() -> RefOr<Schema> {
        let pattern = "^([0-9a-f]+\\.)?[0-9a-f]+\\.[0-9a-f]+$".to_owned();
        string("Where a listing's page ended: pass it back as `after`. Opaque.", Some(pattern)).into()
    }
}

impl ToSchema for Cursor {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Cursor")
    }
}

/// The schema of a named value: a string, one of its names.
macro_rules! named_schema {
    ($($name:ident: $description:literal,)+) => {$(
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                string($description, None).enum_values(Some($name::ALL.map($name::name))).into()
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    )+};
}

named_schema! {
    State: "A task's state.",
    Misfire: "What a schedule does with the occurrences it missed.",
    Overlap: "What a schedule does when an occurrence comes while its last task is live.",
    DeadReason: "Why a task is dead.",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patterns_take_what_the_parsers_take() {
        let json = serde_json::to_value(Lease::schema()).unwrap();
        assert_eq!(json["pattern"], "^[0-9a-fA-F]{16}$");
        let json = serde_json::to_value(State::schema()).unwrap();
        assert_eq!(json["enum"], serde_json::json!(["scheduled", "due", "leased", "dead"]));
    }
}
