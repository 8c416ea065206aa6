//! Push delivery in `hourglass serve`: its flags, and the delivery loop over
//! the backend.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hourglass_push::limits::{CONCURRENCY_DEFAULT, CONCURRENCY_MAX};
use hourglass_push::{
    AllowList, Deliverer, KeyError, PushClient, PushMetrics, Running, SigningKey, SigningKeys, TasksSource,
};
use hourglass_queue::Backend;

/// How long a stopping server lets push requests in flight finish; those
/// still running are delivered again when their leases end.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// A signing key as given, checked when the client is made: clap's own
/// errors quote the value, and a key refused is still a secret. Its `Debug`
/// is the key's, redacted. Spaces around it are trimmed, and an empty one
/// (an empty HOURGLASS_PUSH_SIGNING_KEYS, a trailing comma) is no key, as
/// [`SigningKeys::parse_list`] reads a list.
#[derive(Clone, Debug)]
struct KeyArg(Option<Result<SigningKey, KeyError>>);

impl std::str::FromStr for KeyArg {
    type Err = std::convert::Infallible;

    fn from_str(key: &str) -> Result<KeyArg, std::convert::Infallible> {
        let key = key.trim();
        Ok(KeyArg((!key.is_empty()).then(|| key.parse())))
    }
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// Sign push requests with KEY (16 to 256 bytes): each request carries
    /// `Hourglass-Signature: t=<Unix ms>,v1=<hex>`, one `v1` per key, the
    /// HMAC-SHA256 of `<t>.` and the body. Repeat it to list the old and the
    /// new key while receivers rotate. Also HOURGLASS_PUSH_SIGNING_KEYS,
    /// comma-separated.
    #[arg(
        long = "push-signing-key",
        value_name = "KEY",
        env = "HOURGLASS_PUSH_SIGNING_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    push_signing_keys: Vec<KeyArg>,
    /// Let push targets on HOST (on PORT only, if given; `*` for every host)
    /// reach any address. Without it, a target that resolves to a loopback,
    /// private, link-local or other non-public address is refused: the task
    /// is dead with the reason. Repeatable.
    #[arg(long = "push-allow", value_name = "HOST[:PORT]")]
    push_allow: Vec<String>,
    /// Push requests in flight on this node, at most.
    #[arg(long, value_name = "N", default_value_t = CONCURRENCY_DEFAULT)]
    push_concurrency: usize,
}

/// Starts delivering `backend`'s push tasks with `client`, as `args` say;
/// returns the loop and its counters.
pub fn start(args: &PushArgs, client: PushClient, backend: Arc<dyn Backend>) -> (Running, Arc<PushMetrics>) {
    let source = Arc::new(TasksSource::new(backend));
    let deliverer = Deliverer::new(source, client).concurrency(args.push_concurrency);
    let metrics = deliverer.metrics();
    (deliverer.start(), metrics)
}

/// The HTTP client of push delivery, as `args` set it up: checked before
/// the store is opened.
pub fn client(args: &PushArgs) -> anyhow::Result<PushClient> {
    if !(1..=CONCURRENCY_MAX).contains(&args.push_concurrency) {
        anyhow::bail!("--push-concurrency must be 1 to {CONCURRENCY_MAX}");
    }
    let keys: Result<Vec<SigningKey>, KeyError> = args.push_signing_keys.iter().filter_map(|k| k.0.clone()).collect();
    let keys = keys.and_then(SigningKeys::new).context("--push-signing-key")?;
    let allow = AllowList::parse(&args.push_allow).context("--push-allow")?;
    let client = PushClient::builder().keys(keys).allow(allow).idle_per_host(args.push_concurrency).build();
    client.context("cannot set up the push delivery's HTTP client")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        push: PushArgs,
    }

    fn parse(args: &[&str]) -> Result<PushArgs, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("hourglass").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        client(&cli.push).map_err(|e| format!("{e:#}"))?;
        Ok(cli.push)
    }

    #[test]
    fn keys_repeat_and_never_show() {
        let args =
            parse(&["--push-signing-key", "old-key-0123456789", "--push-signing-key", "new-key-0123456789"]).unwrap();
        assert_eq!(args.push_signing_keys.len(), 2);
        let shown = format!("{args:?}");
        assert!(!shown.contains("old-key") && !shown.contains("new-key"), "{shown}");
        let short = parse(&["--push-signing-key", "short"]).unwrap_err();
        assert_eq!(short, "--push-signing-key: a signing key of 5 bytes: keys are 16 to 256 bytes");
        let listed = parse(&["--push-signing-key", " a-key-0123456789abcdef ,,other-key-0123456789,"]).unwrap();
        assert_eq!(listed.push_signing_keys.iter().filter(|k| k.0.is_some()).count(), 2, "as the variable lists them");
        let empty = parse(&["--push-signing-key", ""]).unwrap();
        assert!(empty.push_signing_keys.iter().all(|k| k.0.is_none()), "an empty key is none");
    }

    #[test]
    fn allow_entries_and_concurrency_are_checked() {
        let args = parse(&["--push-allow", "127.0.0.1:8080", "--push-allow", "hooks.internal"]).unwrap();
        assert_eq!(args.push_allow.len(), 2);
        let url = parse(&["--push-allow", "http://hooks"]).unwrap_err();
        assert!(url.starts_with("--push-allow: allow-list entry \"http://hooks\""), "{url}");
        assert!(parse(&["--push-concurrency", "0"]).unwrap_err().contains("1 to"));
    }
}
