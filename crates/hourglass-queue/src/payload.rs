//! A task's payload: bytes, kept and handed out exactly as they were sent.
//!
//! The queue never looks inside a payload. The HTTP API sends JSON as its
//! text and any other bytes as base64, and shows a payload whose bytes are
//! JSON as JSON; the beanstalkd front puts and reserves bytes as they are.

use std::fmt;
use std::ops::Deref;

/// A payload's bytes.
///
/// ```
/// use hourglass_queue::Payload;
///
/// let json = Payload::from(r#"{"order":42}"#);
/// assert_eq!(json.as_text(), Some(r#"{"order":42}"#));
/// let bytes = Payload::from(vec![0xff, 0x00]);
/// assert_eq!((bytes.len(), bytes.as_text()), (2, None));
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Payload(Box<[u8]>);

impl Payload {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes as text, if they are UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Box<[u8]>> for Payload {
    fn from(bytes: Box<[u8]>) -> Payload {
        Payload(bytes)
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Payload {
        Payload(bytes.into_boxed_slice())
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Payload {
        Payload(bytes.into())
    }
}

impl From<&str> for Payload {
    fn from(text: &str) -> Payload {
        Payload(text.as_bytes().into())
    }
}

impl From<String> for Payload {
    fn from(text: String) -> Payload {
        Payload::from(text.into_bytes())
    }
}

impl From<Box<str>> for Payload {
    fn from(text: Box<str>) -> Payload {
        Payload(text.into_boxed_bytes())
    }
}

impl PartialEq<str> for Payload {
    fn eq(&self, text: &str) -> bool {
        *self.0 == *text.as_bytes()
    }
}

impl PartialEq<&str> for Payload {
    fn eq(&self, text: &&str) -> bool {
        *self == **text
    }
}

impl PartialEq<String> for Payload {
    fn eq(&self, text: &String) -> bool {
        *self == **text
    }
}

impl PartialEq<[u8]> for Payload {
    fn eq(&self, bytes: &[u8]) -> bool {
        *self.0 == *bytes
    }
}

/// Text as text, other bytes escaped (`b"\xff\x00"`).
impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_text() {
            Some(text) => fmt::Debug::fmt(text, f),
            None => write!(f, "b\"{}\"", self.0.escape_ascii()),
        }
    }
}
