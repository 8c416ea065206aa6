//! Names in paths: a queue name may hold `/` (and a key anything), so each
//! is percent-encoded as one path segment; the server decodes it.

use std::fmt::Write;

/// `text` as one path segment: every byte but the unreserved ones of RFC
/// 3986 (`A-Z a-z 0-9 - . _ ~`) percent-encoded, `/` included.
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::segment;

    #[test]
    fn only_unreserved_bytes_stay() {
        assert_eq!(segment("orders.eu-1_x~"), "orders.eu-1_x~");
        assert_eq!(segment("a/b"), "a%2Fb");
        assert_eq!(segment("k 1?#%é"), "k%201%3F%23%25%C3%A9");
        assert_eq!(segment(""), "");
    }
}
