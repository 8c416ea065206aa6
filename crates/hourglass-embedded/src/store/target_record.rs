//! The on-disk encoding of an HTTP target, in a task's body (after its
//! fixed fields, with the body's flag bit 6) and in a queue's settings:
//!
//! ```text
//! size  field
//!    1  method           u8: 0 GET, 1 POST, 2 PUT, 3 PATCH, 4 DELETE
//!    2  url length u     u16 LE, then u bytes of UTF-8
//!    1  header count h   u8, then h times:
//!          2  name length n   u16 LE, then n bytes of UTF-8
//!          2  value length v  u16 LE, then v bytes of UTF-8
//! ```
//!
//! The record that holds it carries the CRC.

use super::sealed::Reader;
use hourglass_queue::limits::{
    PUSH_HEADERS_MAX, PUSH_HEADER_NAME_BYTES_MAX, PUSH_HEADER_VALUE_BYTES_MAX, PUSH_URL_BYTES_MAX,
};
use hourglass_queue::{HttpMethod, HttpTarget};

const _: () = assert!(PUSH_URL_BYTES_MAX <= u16::MAX as usize, "a URL's length fits a u16");
const _: () = assert!(PUSH_HEADER_NAME_BYTES_MAX <= u16::MAX as usize, "a header name's length fits a u16");
const _: () = assert!(PUSH_HEADER_VALUE_BYTES_MAX <= u16::MAX as usize, "a header value's length fits a u16");
const _: () = assert!(PUSH_HEADERS_MAX <= u8::MAX as usize, "a header count fits a u8");

/// Bytes [`encode`] writes for `target`.
pub(crate) fn encoded_bytes(target: &HttpTarget) -> usize {
    1 + 2 + 1 + 4 * target.headers.len() + target.text_bytes()
}

/// Appends `target`, checked against the limits above by the contract.
pub(crate) fn encode(out: &mut Vec<u8>, target: &HttpTarget) {
    out.push(target.method.code());
    out.extend_from_slice(&(target.url.len() as u16).to_le_bytes());
    out.extend_from_slice(target.url.as_bytes());
    out.push(target.headers.len() as u8);
    for (name, value) in &target.headers {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as u16).to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    }
}

/// A target, read where [`encode`] put it.
pub(crate) fn decode(reader: &mut Reader<'_>) -> Result<HttpTarget, String> {
    let code = reader.u8()?;
    let method = HttpMethod::from_code(code).ok_or_else(|| format!("unknown method {code}"))?;
    let len = reader.u16()? as usize;
    let url = reader.str(len)?.into();
    let count = reader.u8()? as usize;
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let len = reader.u16()? as usize;
        let name = reader.str(len)?.into();
        let len = reader.u16()? as usize;
        headers.push((name, reader.str(len)?.into()));
    }
    Ok(HttpTarget { url, method, headers })
}
