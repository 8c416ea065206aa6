//! A token's queue patterns: `*` matches any run of characters (none
//! included, `/` included), every other character only itself.
//!
//! A small matcher of our own rather than a glob crate: queue names are not
//! paths (a `/` in one is an ordinary character), and the only wildcard is
//! `*` (a pattern with any character no queue name holds, a glob's `?`,
//! `[` or `{` among them, is refused). Matching is the classic greedy walk
//! with one backtrack point (the last `*`), linear in practice and at worst
//! `pattern × name`, both bounded by [`QUEUE_NAME_BYTES_MAX`].

use std::fmt;

use hourglass_queue::limits::QUEUE_NAME_BYTES_MAX;
use hourglass_queue::validate::{queue_name_byte, QUEUE_NAME_PUNCTUATION};

/// Bytes in one pattern: a queue name's limit.
pub const PATTERN_BYTES_MAX: usize = QUEUE_NAME_BYTES_MAX;

/// A queue pattern from a token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(Box<str>);

impl Pattern {
    /// `text` as a pattern: 1 to [`PATTERN_BYTES_MAX`] bytes of `*` and
    /// of what a queue name may hold. A pattern with any other character
    /// could match no queue: it is a mistake, and refused as one.
    pub fn new(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Err("a queue pattern is empty (\"*\" is every queue)".into());
        }
        if text.len() > PATTERN_BYTES_MAX {
            return Err(format!("a queue pattern is {} bytes, over {PATTERN_BYTES_MAX}", text.len()));
        }
        if let Some(c) = text.chars().find(|&c| c != '*' && !(c.is_ascii() && queue_name_byte(c as u8))) {
            return Err(format!(
                "queue pattern {text:?} holds {c:?}, which no queue name has: use `*` and A-Z, a-z, 0-9, {}",
                QUEUE_NAME_PUNCTUATION.chars().map(String::from).collect::<Vec<_>>().join(" ")
            ));
        }
        Ok(Pattern(text.into()))
    }

    /// Whether it matches every queue: it is only stars.
    pub fn is_every_queue(&self) -> bool {
        self.0.bytes().all(|b| b == b'*')
    }

    /// Whether `queue` matches it, whole.
    pub fn matches(&self, queue: &str) -> bool {
        let (pattern, name) = (self.0.as_bytes(), queue.as_bytes());
        let (mut p, mut n) = (0, 0);
        // Where the last star was, and the name's position it was tried at.
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match pattern.get(p) {
                Some(b'*') => {
                    star = Some((p, n));
                    p += 1;
                }
                Some(&c) if c == name[n] => {
                    p += 1;
                    n += 1;
                }
                _ => match star {
                    // Let the last star swallow one more character.
                    Some((star_p, star_n)) => {
                        p = star_p + 1;
                        n = star_n + 1;
                        star = Some((star_p, star_n + 1));
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|&c| c == b'*')
    }

    /// The pattern's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn matches(pattern: &str, queue: &str) -> bool {
        Pattern::new(pattern).unwrap().matches(queue)
    }

    #[test]
    fn a_pattern_matches_exactly_its_queues() {
        let queues = ["billing", "billing-", "billing-eu", "billing-eu/late", "xbilling-eu", "Billing-eu", ""];
        let table: [(&str, &[&str]); 9] = [
            ("*", &["billing", "billing-", "billing-eu", "billing-eu/late", "xbilling-eu", "Billing-eu", ""]),
            ("billing-*", &["billing-", "billing-eu", "billing-eu/late"]),
            ("billing", &["billing"]),
            ("*-eu", &["billing-eu", "xbilling-eu", "Billing-eu"]),
            ("billing*eu", &["billing-eu"]),
            ("*billing*", &["billing", "billing-", "billing-eu", "billing-eu/late", "xbilling-eu"]),
            ("b*g-*/*", &["billing-eu/late"]),
            ("**", &["billing", "billing-", "billing-eu", "billing-eu/late", "xbilling-eu", "Billing-eu", ""]),
            ("billing-eu/late*", &["billing-eu/late"]),
        ];
        for (pattern, expected) in table {
            let got: Vec<&str> = queues.iter().copied().filter(|q| matches(pattern, q)).collect();
            assert_eq!(got, expected, "pattern {pattern:?}");
        }
    }

    #[test]
    fn other_glob_characters_are_refused_as_no_queue_has_them() {
        for text in ["a?", "[ab]", "{a,b}", "a\\*", "billing eu", "é*", "a\n"] {
            let error = Pattern::new(text).unwrap_err();
            assert!(error.contains("which no queue name has"), "{text:?}: {error}");
        }
        // Every character a queue name may hold is taken as itself.
        let every = format!("aZ09{QUEUE_NAME_PUNCTUATION}");
        assert!(matches(&every, &every) && matches("(a)*$", "(a)/b;$"));
    }

    #[test]
    fn backtracking_finds_the_later_match() {
        assert!(matches("*ab", "aab"));
        assert!(matches("a*b*c", "abxbyc"));
        assert!(!matches("a*b*c", "abxbyd"));
        assert!(matches("*a*a*a", "aaaa"));
        assert!(!matches("*a*a*a*a*a", "aaaa"));
    }

    #[test]
    fn patterns_are_bounded() {
        assert!(Pattern::new("").is_err());
        assert!(Pattern::new(&"a".repeat(PATTERN_BYTES_MAX)).is_ok());
        assert!(Pattern::new(&"a".repeat(PATTERN_BYTES_MAX + 1)).is_err());
        assert!(Pattern::new("*").unwrap().is_every_queue() && Pattern::new("***").unwrap().is_every_queue());
        assert!(!Pattern::new("a*").unwrap().is_every_queue());
    }

    /// The reference: a regular expression's meaning, written as recursion.
    fn reference(pattern: &[u8], name: &[u8]) -> bool {
        match pattern.split_first() {
            None => name.is_empty(),
            Some((b'*', rest)) => (0..=name.len()).any(|skip| reference(rest, &name[skip..])),
            Some((&c, rest)) => name.first() == Some(&c) && reference(rest, &name[1..]),
        }
    }

    proptest! {
        #[test]
        fn matches_as_the_reference_does(pattern in "[ab*/]{1,8}", name in "[ab/]{0,10}") {
            prop_assert_eq!(matches(&pattern, &name), reference(pattern.as_bytes(), name.as_bytes()));
        }
    }
}
