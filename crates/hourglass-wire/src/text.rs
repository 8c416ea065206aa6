//! The values the API writes as text, in one place: how each is written,
//! how it is read back, and what a client is told when it is wrong.
//!
//! | value        | text                         | why                                              |
//! |--------------|------------------------------|--------------------------------------------------|
//! | [`Lease`]    | 16 hex digits                | a 64-bit number loses precision in JavaScript    |
//! | [`Cursor`]   | `RUNAT.ID` or `PRIORITY.RUNAT.ID`, in hex | opaque to clients: passed back as `after` |
//! | [`State`]    | `scheduled` `due` `leased` `dead` |                                             |
//! | [`Misfire`]  | `skip` `once` `all`          | a schedule's policy for occurrences it missed    |
//! | [`Overlap`]  | `allow` `forbid`             | a schedule's policy while its last task is live  |
//! | [`DeadReason`] | `attempts` `expired`       | why a task is dead                               |
//!
//! In answers these are typed fields. In requests the API takes them as
//! plain strings and reads them with the `parse` functions here, so that a
//! wrong one is the request's 400 `invalid` with a message that says what is
//! expected, rather than a JSON body that does not fit its type.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Text that is not the form a value is written in. Its message is what the
/// API tells the client, word for word.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Not 16 hex digits.
    Lease,
    /// Not the `next` of a page.
    Cursor,
    /// Not one of the state names; holds the text given.
    State(String),
    /// Not one of the misfire policies; holds the text given.
    Misfire(String),
    /// Not one of the overlap policies; holds the text given.
    Overlap(String),
    /// Not one of the dead reasons; holds the text given.
    DeadReason(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Lease => f.write_str("lease must be the 16-hex-digit token a claim returned"),
            ParseError::Cursor => f.write_str("after must be the `next` cursor of a previous page"),
            ParseError::State(given) => write!(f, "state must be scheduled, due, leased or dead, not {given:?}"),
            ParseError::Misfire(given) => one_of(f, "misfire", &Misfire::ALL.map(Misfire::name), given),
            ParseError::Overlap(given) => one_of(f, "overlap", &Overlap::ALL.map(Overlap::name), given),
            ParseError::DeadReason(given) => one_of(f, "dead_reason", &DeadReason::ALL.map(DeadReason::name), given),
        }
    }
}

fn one_of(f: &mut fmt::Formatter<'_>, field: &str, names: &[&str], given: &str) -> fmt::Result {
    write!(f, "{field} must be {}, not {given:?}", names.join(" or "))
}

impl std::error::Error for ParseError {}

/// Serde through the text: `Display` to write, `FromStr` to read.
macro_rules! through_text {
    ($($name:ident),+) => {$(
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<$name, D::Error> {
                from_text(deserializer)
            }
        }
    )+};
}

through_text!(Lease, Cursor);

/// Reads a value from its text: a JSON string that its `FromStr` accepts.
fn from_text<'de, D: Deserializer<'de>, T: FromStr<Err = ParseError>>(deserializer: D) -> Result<T, D::Error> {
    struct Text<T>(std::marker::PhantomData<T>);
    impl<T: FromStr<Err = ParseError>> Visitor<'_> for Text<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
            text.parse().map_err(E::custom)
        }
    }
    deserializer.deserialize_str(Text(std::marker::PhantomData))
}

/// A delivery's lease token: written as 16 hex digits, a string, since a
/// 64-bit number loses precision in JavaScript.
///
/// ```
/// use hourglass_wire::Lease;
///
/// assert_eq!(Lease(255).to_string(), "00000000000000ff");
/// assert_eq!("00000000000000ff".parse::<Lease>(), Ok(Lease(255)));
/// assert!("ff".parse::<Lease>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease(pub u64);

/// Hex digits in a lease's text.
pub const LEASE_DIGITS: usize = 16;
const _: () = assert!(LEASE_DIGITS * 4 == u64::BITS as usize, "16 hex digits are 64 bits");

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for Lease {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Lease, ParseError> {
        if text.len() != LEASE_DIGITS {
            return Err(ParseError::Lease);
        }
        u64::from_str_radix(text, 16).map(Lease).map_err(|_| ParseError::Lease)
    }
}

/// Where a listing's page ended: pass it back as `after` for the next one.
/// Written `RUNAT.ID` in hex, with the priority in front (`PRIORITY.RUNAT.ID`)
/// for a listing in claim order where it is not 0. Clients treat it as
/// opaque.
///
/// ```
/// use hourglass_wire::Cursor;
///
/// let cursor = Cursor { priority: 0, run_at_ms: 255, id: 16 };
/// assert_eq!(cursor.to_string(), "ff.10");
/// assert_eq!("ff.10".parse::<Cursor>(), Ok(cursor));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cursor {
    /// The last task's priority, in a listing in claim order; else 0.
    pub priority: u32,
    /// The last task's due time, Unix ms.
    pub run_at_ms: u64,
    /// The last task's id.
    pub id: u64,
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.priority {
            0 => write!(f, "{:x}.{:x}", self.run_at_ms, self.id),
            priority => write!(f, "{priority:x}.{:x}.{:x}", self.run_at_ms, self.id),
        }
    }
}

impl FromStr for Cursor {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Cursor, ParseError> {
        let number = |s: &str| u64::from_str_radix(s, 16).map_err(|_| ParseError::Cursor);
        let parts: Vec<&str> = text.split('.').collect();
        let (priority, run_at, id) = match parts[..] {
            [run_at, id] => (0, run_at, id),
            [priority, run_at, id] => (u32::from_str_radix(priority, 16).map_err(|_| ParseError::Cursor)?, run_at, id),
            _ => return Err(ParseError::Cursor),
        };
        Ok(Cursor { priority, run_at_ms: number(run_at)?, id: number(id)? })
    }
}

/// Names for the values of a small enum: its text both ways, and serde
/// through the text, so that the names are written once.
macro_rules! named {
    ($(#[$doc:meta])* $name:ident, $error:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every value, in the order the API lists them.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The value's name on the wire.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(text: &str) -> Result<$name, ParseError> {
                $name::ALL.into_iter().find(|value| value.name() == text).ok_or_else(|| ParseError::$error(text.to_owned()))
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<$name, D::Error> {
                from_text(deserializer)
            }
        }
    };
}

named! {
    /// A task's state as the API shows it.
    State, State {
        /// Waiting for its due time.
        Scheduled = "scheduled",
        /// Due: the next claim may take it.
        Due = "due",
        /// Claimed, its lease running.
        Leased = "leased",
        /// Out of attempts, or expired: kept until retried or deleted.
        Dead = "dead",
    }
}

named! {
    /// What a schedule does with the occurrences it missed (while the server
    /// was down or the schedule paused).
    Misfire, Misfire {
        /// Enqueue none of them.
        Skip = "skip",
        /// Enqueue one for all of them.
        Once = "once",
        /// Enqueue each of them.
        All = "all",
    }
}

named! {
    /// What a schedule does when an occurrence comes while its last task is
    /// still live.
    Overlap, Overlap {
        /// Enqueue it anyway.
        Allow = "allow",
        /// Skip it.
        Forbid = "forbid",
    }
}

named! {
    /// Why a task is dead.
    DeadReason, DeadReason {
        /// It ran out of attempts.
        Attempts = "attempts",
        /// It was not delivered before its expiry.
        Expired = "expired",
        /// Its payload was found damaged when it was handed out (the log
        /// says how, and `last_error` too).
        Corrupt = "corrupt",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_round_trip_and_only_sixteen_hex_digits_are_one() {
        for lease in [Lease(0), Lease(255), Lease(u64::MAX), Lease(0x0123_4567_89ab_cdef)] {
            assert_eq!(lease.to_string().len(), LEASE_DIGITS);
            assert_eq!(lease.to_string().parse(), Ok(lease));
            let json = serde_json::to_string(&lease).unwrap();
            assert_eq!(serde_json::from_str::<Lease>(&json).unwrap(), lease);
        }
        assert_eq!(Lease(255).to_string(), "00000000000000ff");
        assert_eq!("00000000000000FF".parse(), Ok(Lease(255)), "either case");
        for bad in ["", "ff", "zzzzzzzzzzzzzzzz", "00000000000000fff", "0000000000000 ff"] {
            assert_eq!(bad.parse::<Lease>(), Err(ParseError::Lease), "{bad:?}");
        }
        assert!(serde_json::from_str::<Lease>("255").is_err(), "a lease is a string");
    }

    #[test]
    fn cursors_round_trip() {
        let cursor = Cursor { priority: 0, run_at_ms: 1_800_000_000_000, id: 42 };
        assert_eq!(cursor.to_string(), "1a3185c5000.2a");
        let with_priority = Cursor { priority: 1_024, ..cursor };
        assert_eq!(with_priority.to_string(), "400.1a3185c5000.2a");
        for cursor in [cursor, with_priority, Cursor { priority: u32::MAX, run_at_ms: u64::MAX, id: u64::MAX }] {
            assert_eq!(cursor.to_string().parse(), Ok(cursor));
            let json = serde_json::to_string(&cursor).unwrap();
            assert_eq!(serde_json::from_str::<Cursor>(&json).unwrap(), cursor);
        }
        for bad in ["", "12", "x.1", "1.2.3.4", "1..2", "100000000.1.2"] {
            assert_eq!(bad.parse::<Cursor>(), Err(ParseError::Cursor), "{bad:?}");
        }
    }

    #[test]
    fn names_round_trip_and_a_wrong_one_lists_the_right_ones() {
        for state in State::ALL {
            assert_eq!(state.name().parse(), Ok(state));
            assert_eq!(serde_json::to_string(&state).unwrap(), format!("\"{state}\""));
        }
        for misfire in Misfire::ALL {
            assert_eq!(misfire.name().parse(), Ok(misfire));
        }
        for overlap in Overlap::ALL {
            assert_eq!(overlap.name().parse(), Ok(overlap));
        }
        for reason in DeadReason::ALL {
            assert_eq!(serde_json::from_str::<DeadReason>(&format!("\"{reason}\"")).unwrap(), reason);
        }
        let names = |all: &[&str]| all.join(" ");
        assert_eq!(names(&State::ALL.map(State::name)), "scheduled due leased dead");
        assert_eq!(names(&Misfire::ALL.map(Misfire::name)), "skip once all");
        assert_eq!(names(&Overlap::ALL.map(Overlap::name)), "allow forbid");
        assert_eq!(
            "done".parse::<State>().unwrap_err().to_string(),
            r#"state must be scheduled, due, leased or dead, not "done""#
        );
        assert_eq!(
            "later".parse::<Misfire>().unwrap_err().to_string(),
            r#"misfire must be skip or once or all, not "later""#
        );
        assert_eq!(
            "never".parse::<Overlap>().unwrap_err().to_string(),
            r#"overlap must be allow or forbid, not "never""#
        );
        assert!(serde_json::from_str::<State>("\"done\"").unwrap_err().to_string().contains("state must be"));
    }
}
