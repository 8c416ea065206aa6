//! `hourglass queue show|set`: a queue's settings, its push target and flow
//! control.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use clap::Subcommand;
use hourglass_client::wire::{PushTarget, QueueSettings};

use crate::client::{connect, Explain};
use crate::{millis, print, ServerArgs};

/// What to do with a queue's settings.
#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Show a queue's push target, rate and cap on tasks in flight.
    Show {
        /// The queue.
        queue: String,
        /// Print the server's JSON answer instead.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Change a queue's settings; what is not named stays as it is.
    Set {
        /// The queue.
        queue: String,
        /// Deliver every task of the queue (without a target of its own) by
        /// an HTTP request to this URL.
        #[arg(long, conflicts_with = "no_push")]
        push_url: Option<String>,
        /// The push request's method (GET, POST, PUT, PATCH, DELETE).
        #[arg(long, requires = "push_url")]
        push_method: Option<String>,
        /// A header of the push request, `Name: value` (repeatable).
        #[arg(long = "push-header", requires = "push_url", value_parser = header)]
        push_headers: Vec<(String, String)>,
        /// How long a push delivery may take (default 30s, at most 30m).
        #[arg(long, value_parser = humantime::parse_duration, requires = "push_url")]
        push_timeout: Option<Duration>,
        /// Stop pushing: the queue's tasks are claimed again.
        #[arg(long)]
        no_push: bool,
        /// Hand out at most this many tasks a second (fractions allowed).
        #[arg(long, conflicts_with = "no_rate")]
        rate: Option<f64>,
        /// The most handed out at once after a quiet spell (with a rate).
        #[arg(long, conflicts_with = "no_rate")]
        burst: Option<u32>,
        /// Lift the rate limit.
        #[arg(long)]
        no_rate: bool,
        /// Lease at most this many tasks at once, pulled and pushed together.
        #[arg(long, conflicts_with = "no_max_in_flight")]
        max_in_flight: Option<u32>,
        /// Lift the cap on tasks in flight.
        #[arg(long)]
        no_max_in_flight: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `Name: value`, as a header is written.
pub fn header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once(':').ok_or_else(|| format!("a header is `Name: value`, not {text:?}"))?;
    Ok((name.trim().to_owned(), value.trim().to_owned()))
}

pub async fn run(command: QueueCommand) -> anyhow::Result<()> {
    match command {
        QueueCommand::Show { queue, json, server } => {
            let client = connect(&server);
            let settings = client.settings(&queue).await.explain(&client)?;
            if json {
                print(&settings)
            } else {
                print!("{}", render(&queue, &settings));
                Ok(())
            }
        }
        QueueCommand::Set {
            queue,
            push_url,
            push_method,
            push_headers,
            push_timeout,
            no_push,
            rate,
            burst,
            no_rate,
            max_in_flight,
            no_max_in_flight,
            server,
        } => {
            let client = connect(&server);
            // A put replaces the settings whole: start from what they are.
            let mut settings = client.settings(&queue).await.explain(&client)?;
            if let Some(url) = push_url {
                let headers: BTreeMap<String, String> = push_headers.into_iter().collect();
                let timeout_ms = push_timeout.map(|timeout| u32::try_from(millis(timeout)).unwrap_or(u32::MAX));
                settings.push = Some(PushTarget { url, method: push_method, headers, timeout_ms });
            }
            if no_push {
                settings.push = None;
            }
            if no_rate {
                (settings.rate_per_s, settings.burst) = (None, None);
            }
            if rate.is_some() {
                // A new rate with no burst named gets its default one.
                (settings.rate_per_s, settings.burst) = (rate, burst);
            } else if burst.is_some() {
                settings.burst = burst;
            }
            if let Some(max) = max_in_flight {
                settings.max_in_flight = Some(max);
            }
            if no_max_in_flight {
                settings.max_in_flight = None;
            }
            let stored = client.put_settings(&queue, &settings).await.explain(&client)?;
            print!("{}", render(&queue, &stored));
            Ok(())
        }
    }
}

/// A queue's settings as lines for people.
pub fn render(queue: &str, settings: &QueueSettings) -> String {
    let mut out = format!("queue:         {queue}\n");
    match &settings.push {
        Some(push) => {
            let method = push.method.as_deref().unwrap_or("POST");
            let _ = writeln!(out, "push:          {method} {}", push.url);
            for (name, value) in &push.headers {
                let _ = writeln!(out, "  header:      {name}: {value}");
            }
            if let Some(timeout_ms) = push.timeout_ms {
                let _ = writeln!(out, "  timeout:     {}", crate::render::millis(f64::from(timeout_ms)));
            }
        }
        None => out.push_str("push:          none (tasks are claimed)\n"),
    }
    match settings.rate_per_s {
        Some(rate) => {
            let burst = settings.burst.map_or_else(|| "default".to_owned(), |burst| burst.to_string());
            let _ = writeln!(out, "rate:          {rate}/s, burst {burst}");
        }
        None => out.push_str("rate:          unlimited\n"),
    }
    match settings.max_in_flight {
        Some(max) => {
            let _ = writeln!(out, "max in flight: {max}");
        }
        None => out.push_str("max in flight: unlimited\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_as_lines_and_headers_parse() {
        let settings = QueueSettings {
            push: Some(PushTarget {
                url: "https://e.com/h".into(),
                method: None,
                headers: [("X-A".to_owned(), "1".to_owned())].into(),
                timeout_ms: Some(5_000),
            }),
            rate_per_s: Some(2.5),
            burst: None,
            max_in_flight: Some(8),
        };
        let text = render("q", &settings);
        assert!(text.contains("push:          POST https://e.com/h\n  header:      X-A: 1\n"), "{text}");
        assert!(text.contains("rate:          2.5/s, burst default\nmax in flight: 8"), "{text}");
        assert!(render("q", &QueueSettings::default()).contains("push:          none"));
        assert_eq!(header("Authorization: Bearer a:b"), Ok(("Authorization".into(), "Bearer a:b".into())));
        assert!(header("no colon").is_err());
    }
}
