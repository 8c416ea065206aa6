//! Replies as beanstalkd words them: a line, a line and a job's body, or
//! `OK <bytes>` and a YAML document, each ending in `\r\n`; and the
//! engine's refusals in beanstalkd's words.

use std::fmt::Write as _;

use hourglass_queue::QueueError;

/// The reply to an engine's refusal.
pub(super) fn refusal(error: &QueueError) -> &'static str {
    match error {
        QueueError::NotFound(_) | QueueError::StaleLease(_) | QueueError::Conflict(_) => "NOT_FOUND",
        QueueError::TooManyTasks { .. } | QueueError::OverMemoryBudget { .. } | QueueError::OverDiskBudget { .. } => {
            "OUT_OF_MEMORY"
        }
        QueueError::Invalid(_) | QueueError::PayloadTooLarge { .. } => "BAD_FORMAT",
        QueueError::ShuttingDown => "DRAINING",
        _ => "INTERNAL_ERROR",
    }
}

/// A reply without a body.
pub(super) fn line(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `<word> <id> <bytes>` and the job's body.
pub(super) fn job(out: &mut Vec<u8>, word: &str, id: u64, body: &[u8]) {
    line(out, &format!("{word} {id} {}", body.len()));
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// `OK <bytes>` and a YAML document.
pub(super) fn yaml(out: &mut Vec<u8>, document: &str) {
    line(out, &format!("OK {}", document.len()));
    out.extend_from_slice(document.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A YAML mapping of scalars, in order, as beanstalkd prints them (values
/// are printed as given: numbers, words, or quoted text).
pub(super) fn mapping(pairs: &[(&str, String)]) -> String {
    let mut document = String::from("---\n");
    for (key, value) in pairs {
        let _ = writeln!(document, "{key}: {value}");
    }
    document
}

/// A YAML list of names.
pub(super) fn list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut document = String::from("---\n");
    for name in names {
        let _ = writeln!(document, "- {name}");
    }
    document
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_worded_as_beanstalkd_words_them() {
        let mut out = Vec::new();
        job(&mut out, "RESERVED", 7, b"abc");
        line(&mut out, "DELETED");
        yaml(&mut out, &list(["default", "a"]));
        assert_eq!(out, b"RESERVED 7 3\r\nabc\r\nDELETED\r\nOK 18\r\n---\n- default\n- a\n\r\n");
        assert_eq!(mapping(&[("id", "1".into()), ("tube", "default".into())]), "---\nid: 1\ntube: default\n");
        assert_eq!(refusal(&QueueError::StaleLease(7)), "NOT_FOUND");
    }
}
