//! Payloads on the wire: a task's payload is bytes. A request sends JSON as
//! `payload` (its text is kept as sent) or any bytes as `payload_base64`
//! (standard base64 with padding, RFC 4648 §4). An answer shows a payload
//! whose bytes are JSON text as `payload`, and any other as
//! `payload_base64`: exactly one of the two.
//!
//! The rule is by content, so bytes sent as base64 that happen to be JSON
//! text come back as `payload`; [`bytes`] gives a shown payload's bytes
//! either way.
//!
//! ```
//! use hourglass_wire::payload;
//!
//! let (json, base64) = payload::show(br#"{"order":42}"#);
//! assert_eq!((json.unwrap().get(), base64), (r#"{"order":42}"#, None));
//! let (json, base64) = payload::show(&[0xff, 0x00]);
//! assert_eq!((json.is_none(), base64.as_deref()), (true, Some("/wA=")));
//! assert_eq!(payload::bytes(None, Some("/wA=")).unwrap().unwrap(), [0xff, 0x00]);
//! ```

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// Whether `bytes` are JSON text: what makes a payload shown as `payload`,
/// and pushed as `application/json`.
pub fn is_json(bytes: &[u8]) -> bool {
    as_json(bytes).is_some()
}

/// `bytes` as JSON, if they are JSON text and nothing else: whitespace
/// around it would be lost in `payload`, so such bytes are not.
fn as_json(bytes: &[u8]) -> Option<&RawValue> {
    let text = std::str::from_utf8(bytes).ok()?;
    serde_json::from_str::<&RawValue>(text).ok().filter(|raw| raw.get().len() == text.len())
}

/// A stored payload as an answer shows it: (`payload`, `payload_base64`),
/// exactly one of them.
pub fn show(bytes: &[u8]) -> (Option<Box<RawValue>>, Option<String>) {
    // Read once: JSON text is copied as it is, not parsed into values.
    match as_json(bytes) {
        Some(raw) => (Some(raw.to_owned()), None),
        None => (None, Some(STANDARD.encode(bytes))),
    }
}

/// An answer's `payload` as read: present (a JSON `null` too) or absent,
/// where serde's `Option` would read `null` as absent.
pub(crate) fn shown<'de, D: serde::Deserializer<'de>>(json: D) -> Result<Option<Box<RawValue>>, D::Error> {
    serde::Deserialize::deserialize(json).map(Some)
}

/// The bytes a request's `payload` and `payload_base64` stand for; `payload`
/// is `null` if left out.
///
/// # Errors
/// Both given (`payload` other than `null`), or `payload_base64` not
/// standard base64: a message that says so.
pub fn sent(payload: Box<RawValue>, base64: Option<&str>) -> Result<Vec<u8>, String> {
    match base64 {
        // The JSON text as it came, checked by the parser, not copied.
        None => Ok(String::from(Box::<str>::from(payload)).into_bytes()),
        Some(_) if payload.get() != "null" => Err("payload and payload_base64: give one or the other".to_owned()),
        Some(text) => decode(text),
    }
}

/// The bytes of a payload an answer shows (either field), or `None` if it
/// shows neither.
///
/// # Errors
/// `payload_base64` not standard base64.
pub fn bytes(payload: Option<&RawValue>, base64: Option<&str>) -> Option<Result<Vec<u8>, String>> {
    match (payload, base64) {
        (_, Some(text)) => Some(decode(text)),
        (Some(json), None) => Some(Ok(json.get().as_bytes().to_vec())),
        (None, None) => None,
    }
}

/// What a shown payload means in JSON: the payload if it is JSON.
///
/// # Errors
/// Bytes that are not JSON text (`payload_base64`), or JSON that is not a `T`.
pub fn json<T: DeserializeOwned>(payload: Option<&RawValue>) -> Result<T, serde_json::Error> {
    match payload {
        Some(raw) => serde_json::from_str(raw.get()),
        None => Err(serde::de::Error::custom("the payload is bytes that are not JSON (payload_base64)")),
    }
}

/// The readers of a shown payload, on each answer that shows one.
macro_rules! shown_payload {
    ($($shown:ty),*) => {$(
        impl $shown {
            /// The payload's bytes, whichever field shows them
            /// ([`payload::bytes`](crate::payload::bytes)); empty if neither does.
            ///
            /// # Errors
            /// `payload_base64` is not base64.
            pub fn payload_bytes(&self) -> Result<Vec<u8>, String> {
                bytes(self.payload.as_deref(), self.payload_base64.as_deref()).unwrap_or(Ok(Vec::new()))
            }

            /// The payload read as a `T` ([`payload::json`](crate::payload::json)).
            ///
            /// # Errors
            /// It is bytes that are not JSON, or JSON that is not a `T`.
            pub fn payload_json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
                json(self.payload.as_deref())
            }
        }
    )*};
}

shown_payload!(crate::Task, crate::ClaimedTask, crate::Schedule);

/// `bytes` as `payload_base64`.
pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

fn decode(text: &str) -> Result<Vec<u8>, String> {
    STANDARD.decode(text).map_err(|error| format!("payload_base64 is not standard base64 with padding: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_shown_as_json_when_its_bytes_are_json_and_as_base64_otherwise() {
        for json in [&b"null"[..], b"42", b"{\"a\": [1, 2]}", "\"caf\u{e9}\"".as_bytes()] {
            let (shown, base64) = show(json);
            assert_eq!((shown.unwrap().get().as_bytes(), base64), (json, None));
        }
        // Whitespace around JSON would be lost in `payload`: such bytes are
        // shown as they are, in base64.
        for other in [&b""[..], b"hello", b"{\"a\":", b" 1", b"[1]\n", &[0xc3, 0x28], &[0, 1, 2, 255]] {
            let (shown, base64) = show(other);
            assert!(shown.is_none(), "{other:?}");
            assert_eq!(bytes(None, base64.as_deref()).unwrap().unwrap(), other, "round trip");
            assert!(!is_json(other));
        }
    }

    #[test]
    fn a_request_gives_json_or_base64_never_both() {
        let null = RawValue::from_string("null".into()).unwrap();
        let json = RawValue::from_string("[1]".into()).unwrap();
        assert_eq!(sent(json.clone(), None).unwrap(), b"[1]");
        assert_eq!(sent(null.clone(), None).unwrap(), b"null", "left out: null");
        assert_eq!(sent(null.clone(), Some("AAE=")).unwrap(), [0, 1]);
        assert_eq!(sent(null.clone(), Some("")).unwrap(), b"", "empty bytes");
        assert!(sent(json, Some("AAE=")).unwrap_err().contains("one or the other"));
        for bad in ["AAE", "A*E=", "AAE=\n"] {
            assert!(sent(null.clone(), Some(bad)).unwrap_err().contains("base64"), "{bad:?}");
        }
    }
}
