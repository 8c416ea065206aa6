//! The `--tokens` file: TOML, a `[[token]]` table per token.
//!
//! ```toml
//! [[token]]
//! name = "billing-producer"
//! sha256 = "<hex SHA-256 of the token>"   # the file holds no secret
//! queues = ["billing-*"]                  # patterns; "*" for all
//! can = ["enqueue", "read"]               # read, enqueue, consume, manage, admin
//! ```
//!
//! Read whole or refused whole: any error names the file and the line, and
//! nothing of a refused file is used.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::{Grant, Pattern, Permission};

/// Tokens in one file.
pub const TOKENS_MAX: usize = 10_000;
/// Queue patterns of one token.
pub const PATTERNS_MAX: usize = 100;
/// Bytes of a token's name: letters, digits, `.`, `_` and `-`.
pub const NAME_BYTES_MAX: usize = 64;
/// Bytes of the file: room for [`TOKENS_MAX`] tokens of a few patterns.
pub const FILE_BYTES_MAX: usize = 4 << 20;
const _: () = assert!(FILE_BYTES_MAX / TOKENS_MAX >= 300, "room for a token of a name, a digest and a few patterns");

/// The name of `--token`'s grant, which no token of the file may take: logs
/// and `/v1/whoami` could not tell the two apart.
pub const ROOT_NAME: &str = "--token";
/// The name of every request's grant on a server without tokens, which no
/// token of the file may take either.
pub const OPEN_NAME: &str = "anonymous";

/// A SHA-256 digest, as the file gives it in hex.
pub(crate) type Digest = [u8; 32];

/// A token file that was refused: which, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFileError {
    /// The file.
    pub path: PathBuf,
    /// The line the error is on (1-based), when it is on one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TokenFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "token file {}, line {line}: {}", self.path.display(), self.message),
            None => write!(f, "token file {}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for TokenFileError {}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    token: Vec<Entry>,
}

/// One `[[token]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Spanned<String>,
    sha256: Spanned<String>,
    queues: Spanned<Vec<Spanned<String>>>,
    can: Spanned<Vec<Permission>>,
}

/// A file's tokens, by digest and by name.
#[derive(Debug, Default)]
pub(crate) struct TokenSet {
    pub(crate) by_digest: HashMap<Digest, Arc<Grant>>,
    pub(crate) by_name: HashMap<Box<str>, Arc<Grant>>,
}

/// Reads and checks the file at `path`.
pub(crate) fn read(path: &Path) -> Result<TokenSet, TokenFileError> {
    let error = |line, message: String| TokenFileError { path: path.to_owned(), line, message };
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(FILE_BYTES_MAX as u64 + 1).read_to_string(&mut text))
        .map_err(|e| error(None, format!("cannot be read: {e}")))?;
    if text.len() > FILE_BYTES_MAX {
        return Err(error(None, format!("is over {FILE_BYTES_MAX} bytes")));
    }
    parse(&text).map_err(|(offset, message)| error(offset.map(|at| line_of(&text, at)), message))
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// `text` read into tokens, or the byte offset of the error and what it is.
fn parse(text: &str) -> Result<TokenSet, (Option<usize>, String)> {
    let document: Document =
        toml::from_str(text).map_err(|e| (e.span().map(|span| span.start), e.message().to_owned()))?;
    if document.token.len() > TOKENS_MAX {
        return Err((None, format!("{} tokens, over {TOKENS_MAX}", document.token.len())));
    }
    let mut set = TokenSet::default();
    let mut names = HashSet::new();
    for entry in document.token {
        let at = |spanned_start: usize| Some(spanned_start);
        let name = entry.name.get_ref();
        check_name(name).map_err(|message| (at(entry.name.span().start), message))?;
        if !names.insert(name.clone()) {
            return Err((at(entry.name.span().start), format!("a second token named {name:?}")));
        }
        let digest = digest_of_hex(entry.sha256.get_ref()).map_err(|m| (at(entry.sha256.span().start), m))?;
        let patterns = entry.queues.get_ref();
        if patterns.is_empty() || patterns.len() > PATTERNS_MAX {
            let message = format!("{} queue patterns; give 1 to {PATTERNS_MAX} (\"*\" for all)", patterns.len());
            return Err((at(entry.queues.span().start), message));
        }
        let queues = patterns
            .iter()
            .map(|p| Pattern::new(p.get_ref()).map_err(|message| (at(p.span().start), message)))
            .collect::<Result<Vec<_>, _>>()?;
        if entry.can.get_ref().is_empty() {
            return Err((
                at(entry.can.span().start),
                "no permissions: give some of read, enqueue, consume, manage, admin".into(),
            ));
        }
        let grant = Arc::new(Grant::new(name, queues, entry.can.get_ref()));
        if set.by_digest.insert(digest, grant.clone()).is_some() {
            // Two names for one token: which of them a request is would be
            // a guess.
            return Err((at(entry.sha256.span().start), format!("token {name:?} has the digest of an earlier token")));
        }
        set.by_name.insert(name.as_str().into(), grant);
    }
    Ok(set)
}

/// A name of 1 to [`NAME_BYTES_MAX`] letters, digits, `.`, `_` and `-`:
/// safe to log and to show.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX {
        return Err(format!("a token's name has 1 to {NAME_BYTES_MAX} bytes, not {}", name.len()));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        return Err(format!("token name {name:?}: use letters, digits, '.', '_' and '-'"));
    }
    if [ROOT_NAME, OPEN_NAME].contains(&name) {
        return Err(format!("token name {name:?} is the server's own: choose another"));
    }
    Ok(())
}

/// 64 hex digits as a digest.
fn digest_of_hex(hex_text: &str) -> Result<Digest, String> {
    let mut digest = [0; 32];
    hex::decode_to_slice(hex_text, &mut digest)
        .map_err(|_| "sha256 is the token's SHA-256 in 64 hex digits (printf %s \"$TOKEN\" | sha256sum)".to_owned())?;
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const OTHER: &str = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

    fn entry(name: &str, sha: &str, queues: &str, can: &str) -> String {
        format!("[[token]]\nname = \"{name}\"\nsha256 = \"{sha}\"\nqueues = {queues}\ncan = {can}\n")
    }

    fn refused(text: &str) -> (Option<usize>, String) {
        let (offset, message) = parse(text).map(|_| ()).unwrap_err();
        (offset.map(|at| line_of(text, at)), message)
    }

    #[test]
    fn the_issue_s_shape_reads() {
        let text = entry("billing-producer", DIGEST, "[\"billing-*\"]", "[\"enqueue\", \"read\"]")
            + &entry("ops", OTHER, "[\"*\"]", "[\"admin\"]");
        let set = parse(&text).unwrap();
        let producer = &set.by_name["billing-producer"];
        assert!(
            producer.allows(Permission::Enqueue, "billing-eu") && !producer.allows(Permission::Consume, "billing-eu")
        );
        let mut digest = [0; 32];
        hex::decode_to_slice(DIGEST, &mut digest).unwrap();
        assert_eq!(set.by_digest[&digest].name(), "billing-producer");
        assert!(set.by_name["ops"].everywhere(Permission::Manage));
        assert!(parse("").unwrap().by_digest.is_empty(), "an empty file is no tokens");
    }

    #[test]
    fn each_error_names_its_line() {
        let good = entry("a", DIGEST, "[\"*\"]", "[\"read\"]");
        let cases = [
            (good.clone() + &entry("b", "zz", "[\"*\"]", "[\"read\"]"), 8, "64 hex digits"),
            (good.clone() + &entry("a", OTHER, "[\"*\"]", "[\"read\"]"), 7, "a second token named"),
            (good.clone() + &entry("b", DIGEST, "[\"*\"]", "[\"read\"]"), 8, "digest of an earlier token"),
            (good.clone() + &entry("b", OTHER, "[\"*\"]", "[\"delete\"]"), 10, "unknown variant"),
            (good.clone() + &entry("b", OTHER, "[]", "[\"read\"]"), 9, "0 queue patterns"),
            (good.clone() + &entry("b", OTHER, "[\"\"]", "[\"read\"]"), 9, "empty"),
            (good.clone() + &entry("b", OTHER, "[\"*\"]", "[]"), 10, "no permissions"),
            (good.clone() + &entry("b c", OTHER, "[\"*\"]", "[\"read\"]"), 7, "letters, digits"),
            (good.clone() + &entry("--token", OTHER, "[\"*\"]", "[\"read\"]"), 7, "the server's own"),
            (good.clone() + &entry("anonymous", OTHER, "[\"*\"]", "[\"read\"]"), 7, "the server's own"),
            (good.clone() + &entry("b", OTHER, "[\"a\", \"b?\"]", "[\"read\"]"), 9, "which no queue name has"),
            (good.clone() + "[[token]]\nname = \"c\"\n", 6, "missing field"),
            (good.clone() + "[[tokens]]\n", 6, "unknown field"),
            (good.clone() + "[[token]\n", 6, ""),
        ];
        for (text, line, says) in cases {
            let (got_line, message) = refused(&text);
            assert_eq!(got_line, Some(line), "{message}\n{text}");
            assert!(message.contains(says), "{message:?} should say {says:?}");
        }
    }

    #[test]
    fn limits_are_named() {
        let many = (0..=PATTERNS_MAX).map(|i| format!("\"q{i}\"")).collect::<Vec<_>>().join(",");
        let (_, message) = refused(&entry("a", DIGEST, &format!("[{many}]"), "[\"read\"]"));
        assert!(message.contains(&format!("1 to {PATTERNS_MAX}")), "{message}");
        let long = "n".repeat(NAME_BYTES_MAX + 1);
        let (_, message) = refused(&entry(&long, DIGEST, "[\"*\"]", "[\"read\"]"));
        assert!(message.contains(&NAME_BYTES_MAX.to_string()), "{message}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        std::fs::write(&big, "#".repeat(FILE_BYTES_MAX + 1)).unwrap();
        let error = read(&big).unwrap_err();
        assert!(error.to_string().contains("big.toml") && error.message.contains("over"), "{error}");
        let one = "[[token]]\nname = \"a\"\nsha256 = \"x\"\nqueues = [\"*\"]\ncan = [\"read\"]\n";
        let (_, message) = refused(&one.repeat(TOKENS_MAX + 1));
        assert_eq!(message, format!("{} tokens, over {TOKENS_MAX}", TOKENS_MAX + 1));
        let missing = read(&dir.path().join("none.toml")).unwrap_err();
        assert!(missing.to_string().contains("none.toml") && missing.line.is_none(), "{missing}");
    }
}
