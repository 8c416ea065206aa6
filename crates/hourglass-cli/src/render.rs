//! What the commands print for people: tables of queues, a task's fields,
//! durations and times. `--json` prints the server's answer instead, for
//! scripts.

use std::fmt::Write;

use hourglass_client::wire::{Node, Overview, Task};
use serde::Serialize;

/// `value` as indented JSON, payloads included (a payload passes through the
/// client as the text the server sent).
pub fn pretty(value: &impl Serialize) -> serde_json::Result<String> {
    let compact = serde_json::to_string(value)?;
    let mut out = Vec::new();
    serde_transcode::transcode(
        &mut serde_json::Deserializer::from_str(&compact),
        &mut serde_json::Serializer::pretty(&mut out),
    )?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// Text of a table: a header row, then rows, columns padded to their widest
/// cell; numbers (cells that start with a digit) are right-aligned.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|row| row[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let mut line = |cells: Vec<&str>, numeric: &dyn Fn(usize, &str) -> bool| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let width = widths[i];
            if i > 0 {
                text.push_str("  ");
            }
            if numeric(i, cell) {
                let _ = write!(text, "{cell:>width$}");
            } else {
                let _ = write!(text, "{cell:<width$}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    let is_number = |i: usize, cell: &str| i > 0 && cell.starts_with(|c: char| c.is_ascii_digit() || c == '-');
    line(header.to_vec(), &|i, _| rows.iter().any(|row| is_number(i, &row[i])));
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &is_number);
    }
    out
}

/// A count, with thousands separated: `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Milliseconds, fractional, as people read them: `0.42ms`, `12.3ms`, `2.50s`.
pub fn millis(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.2}ms")
    } else if ms < 1_000.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{:.2}s", ms / 1_000.0)
    }
}

/// How long ago `at_ms` was at `now_ms`, finer than [`relative`] under a
/// minute: `412ms ago`, `2.5s ago`, `3m ago`; `now` if not before.
pub fn ago(at_ms: u64, now_ms: u64) -> String {
    match now_ms.saturating_sub(at_ms) {
        0 => "now".into(),
        ms @ 1..1_000 => format!("{ms}ms ago"),
        ms @ 1_000..60_000 => format!("{:.1}s ago", ms as f64 / 1_000.0),
        _ => relative(at_ms, now_ms),
    }
}

/// How far `at_ms` is from `now_ms`: `in 5m`, `3s ago`, `now`.
pub fn relative(at_ms: u64, now_ms: u64) -> String {
    let (seconds, future) =
        if at_ms >= now_ms { ((at_ms - now_ms) / 1_000, true) } else { ((now_ms - at_ms) / 1_000, false) };
    if seconds == 0 {
        return "now".into();
    }
    let text = match seconds {
        0..60 => format!("{seconds}s"),
        60..3_600 => format!("{}m", seconds / 60),
        3_600..172_800 => format!("{:.1}h", seconds as f64 / 3_600.0),
        _ => format!("{}d", seconds / 86_400),
    };
    if future {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

/// A Unix time in ms as an RFC 3339 instant, in UTC, to the millisecond.
pub fn instant(at_ms: u64) -> String {
    timestamp(at_ms).map_or_else(|| at_ms.to_string(), |t| format!("{t:.3}"))
}

/// A Unix time in ms as this machine's local time of day, to the
/// millisecond: `14:03:07.250`.
pub fn time_of_day(at_ms: u64) -> String {
    timestamp(at_ms).map_or_else(
        || at_ms.to_string(),
        |t| t.to_zoned(jiff::tz::TimeZone::system()).strftime("%H:%M:%S%.3f").to_string(),
    )
}

fn timestamp(at_ms: u64) -> Option<jiff::Timestamp> {
    jiff::Timestamp::from_millisecond(i64::try_from(at_ms).ok()?).ok()
}

/// A time with how far it is from now: `2026-11-30T12:00:00.000Z (in 5m)`.
pub fn when(at_ms: u64, now_ms: u64) -> String {
    format!("{} ({})", instant(at_ms), relative(at_ms, now_ms))
}

/// The server's queues and totals (`/v1/overview`) as a table.
pub fn queues(overview: &Overview) -> String {
    if overview.queues.is_empty() {
        return "no queues yet: add a task with `hourglass add QUEUE`\n".into();
    }
    let rows: Vec<Vec<String>> = overview
        .queues
        .iter()
        .map(|q| {
            let (queue, rates) = (&q.queue, &q.rates);
            let late = |p: f64| if queue.lateness.samples == 0 { "-".into() } else { millis(p) };
            let rate = |per_s: f64| format!("{per_s:.1}");
            vec![
                queue.name.clone(),
                if queue.paused { "paused".into() } else { "running".into() },
                count(queue.scheduled),
                count(queue.due),
                count(queue.leased),
                count(queue.dead),
                queue.oldest_due_ms.map_or_else(|| "-".into(), |at| relative(at, overview.now_ms)),
                late(queue.lateness.p50),
                late(queue.lateness.p99),
                rate(rates.enqueued),
                rate(rates.delivered),
                rate(rates.acked),
            ]
        })
        .collect();
    let header = [
        "QUEUE",
        "STATE",
        "SCHEDULED",
        "DUE",
        "LEASED",
        "DEAD",
        "OLDEST DUE",
        "P50 LATE",
        "P99 LATE",
        "IN/S",
        "OUT/S",
        "ACK/S",
    ];
    let t = &overview.totals;
    let mut out = table(&header, &rows);
    if !overview.server_wide {
        // A token that does not read every queue is shown its queues' sums.
        let _ = writeln!(
            out,
            "\n{} tasks in the queues this token reads; since start: {} enqueued, {} delivered, {} acked",
            count(t.tasks),
            count(t.enqueued),
            count(t.delivered),
            count(t.acked),
        );
        freshness(&mut out, overview);
        return out;
    }
    let _ = writeln!(
        out,
        "\n{} tasks, {} schedules; since start: {} enqueued, {} delivered, {} acked, {} dead",
        count(t.tasks),
        count(t.schedules),
        count(t.enqueued),
        count(t.delivered),
        count(t.acked),
        count(t.died),
    );
    freshness(&mut out, overview);
    if let Some(nodes) = &overview.nodes {
        out.push('\n');
        out.push_str(&self::nodes(nodes));
    }
    out
}

/// Where several nodes count, how fresh the counters are, as a line.
fn freshness(out: &mut String, overview: &Overview) {
    if let Some(as_of_ms) = overview.totals.counters_as_of_ms {
        let _ = writeln!(out, "counters as of {}, from every node", ago(as_of_ms, overview.now_ms));
    }
}

/// The nodes that share the store, a line each: its name (`(this)` for the
/// one that answered), its latest heartbeat's age, and its shards.
pub fn nodes(nodes: &[Node]) -> String {
    let names: Vec<String> =
        nodes.iter().map(|n| if n.this { format!("{} (this)", n.name) } else { n.name.clone() }).collect();
    let ages: Vec<String> = nodes.iter().map(|n| ago(0, n.heartbeat_age_ms)).collect();
    let name_width = names.iter().map(|name| name.chars().count()).max().unwrap_or(0);
    let age_width = ages.iter().map(String::len).max().unwrap_or(0);
    let mut out = format!("{} nodes share the store:\n", nodes.len());
    for ((node, name), age) in nodes.iter().zip(&names).zip(&ages) {
        let shards = match node.shards.as_slice() {
            [] => "none".to_owned(),
            shards => shards.iter().map(u16::to_string).collect::<Vec<_>>().join(" "),
        };
        let _ = writeln!(out, "  {name:<name_width$}  heartbeat {age:>age_width$}  shards {shards}");
    }
    out
}

/// A task (`GET /v1/tasks/{id}`) as aligned fields, then its payload.
pub fn task(task: &Task, now_ms: u64) -> serde_json::Result<String> {
    let mut fields: Vec<(&str, String)> =
        vec![("id", task.id.to_string()), ("queue", task.queue.clone()), ("state", task.state.to_string())];
    fields.extend(task.dead_reason.map(|reason| ("dead reason", reason.to_string())));
    fields.extend(task.last_error.clone().map(|error| ("last error", error)));
    fields.extend(
        task.http
            .as_ref()
            .map(|http| ("push to", format!("{} {}", http.method.as_deref().unwrap_or("POST"), http.url))),
    );
    fields.push(("due", when(task.run_at_ms, now_ms)));
    fields.push(("attempts", format!("{} of {}", task.attempt, task.max_attempts)));
    fields.extend(task.key.clone().map(|key| ("key", key)));
    fields.extend(task.every_ms.map(|every_ms| ("repeats every", millis(every_ms as f64))));
    fields.extend(task.lease_until_ms.map(|at| ("lease until", when(at, now_ms))));
    fields.extend(task.expires_at_ms.map(|at| ("expires", when(at, now_ms))));
    fields.push(("created", when(task.created_ms, now_ms)));
    let width = fields.iter().map(|(name, _)| name.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (name, value) in fields {
        let _ = writeln!(out, "{:<width$} {value}", format!("{name}:"));
    }
    match (&task.payload, &task.payload_base64) {
        (_, Some(base64)) => {
            let bytes = task.payload_bytes().map_err(<serde_json::Error as serde::de::Error>::custom)?.len();
            let _ = writeln!(out, "payload ({bytes} bytes, not JSON; base64):\n{base64}");
        }
        (payload, None) => {
            let _ = writeln!(out, "payload:\n{}", pretty(payload)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_client::wire::{Lateness, OverviewQueue, Queue, Rates, Totals};

    #[test]
    fn a_table_pads_columns_and_right_aligns_numbers() {
        let text = table(&["QUEUE", "DUE"], &[vec!["emails".into(), "1,204".into()], vec!["a".into(), "3".into()]]);
        assert_eq!(text, "QUEUE     DUE\nemails  1,204\na           3\n");
    }

    #[test]
    fn counts_times_and_durations_read_as_people_write_them() {
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(millis(0.4231), "0.42ms");
        assert_eq!(millis(12.34), "12.3ms");
        assert_eq!(millis(2_500.0), "2.50s");
        assert_eq!(relative(10_000, 10_000), "now");
        assert_eq!(relative(15_000, 10_000), "in 5s");
        assert_eq!(relative(10_000, 10_000 + 3 * 60_000), "3m ago");
        assert_eq!(relative(10_000 + 3 * 86_400_000, 10_000), "in 3d");
        assert_eq!(instant(1_800_000_000_123), "2027-01-15T08:00:00.123Z");
    }

    #[test]
    fn json_is_indented_payload_and_all() {
        let task: Task = serde_json::from_str(
            r#"{"id":1,"queue":"q","state":"due","payload":{"b":[1,{}],"a":"x"},"run_at_ms":5,"attempt":0,
                "max_attempts":3,"priority":0,"created_ms":5}"#,
        )
        .unwrap();
        let text = pretty(&task).unwrap();
        assert!(text.starts_with("{\n  \"id\": 1,\n  \"queue\": \"q\",\n  \"state\": \"due\",\n"), "{text}");
        assert!(text.contains("  \"payload\": {\n    \"b\": [\n      1,\n      {}\n    ],\n    \"a\": \"x\"\n  },\n"));
    }

    #[test]
    fn a_task_prints_every_field_it_has_and_its_payload() {
        let now_ms = 1_800_000_000_000;
        let task: Task = serde_json::from_str(&format!(
            r#"{{"id": 42, "queue": "emails", "state": "dead", "dead_reason": "attempts", "last_error": "SMTP 550",
                "run_at_ms": {}, "attempt": 5, "max_attempts": 5, "priority": 0, "key": "order-7",
                "created_ms": {}, "payload": {{ "to": "a@example.com" }}}}"#,
            now_ms - 60_000,
            now_ms - 120_000
        ))
        .unwrap();
        let text = super::task(&task, now_ms).unwrap();
        assert!(text.contains("id:          42\n"), "{text}");
        assert!(text.contains("dead reason: attempts\n"), "{text}");
        assert!(text.contains("last error:  SMTP 550\n"), "{text}");
        assert!(text.contains("attempts:    5 of 5\n"), "{text}");
        assert!(text.contains("due:         2027-01-15T07:59:00.000Z (1m ago)\n"), "{text}");
        assert!(text.ends_with("payload:\n{\n  \"to\": \"a@example.com\"\n}\n"), "{text}");
        assert!(!text.contains("lease until"), "absent fields are left out: {text}");
    }

    #[test]
    fn a_payload_that_is_not_json_prints_as_its_size_and_base64() {
        let task: Task = serde_json::from_str(
            r#"{"id": 1, "queue": "q", "state": "due", "payload_base64": "/wAB", "run_at_ms": 5, "attempt": 0,
                "max_attempts": 3, "priority": 0, "created_ms": 5}"#,
        )
        .unwrap();
        let text = super::task(&task, 5).unwrap();
        assert!(text.ends_with("payload (3 bytes, not JSON; base64):\n/wAB\n"), "{text}");
    }

    #[test]
    fn the_queues_table_has_a_row_per_queue_and_the_totals() {
        let queue = Queue {
            name: "emails".into(),
            scheduled: 1200,
            due: 3,
            leased: 1,
            dead: 0,
            oldest_due_ms: Some(4_000),
            lateness: Lateness { samples: 10, p50: 0.5, p99: 2.25, max: 3.0 },
            paused: true,
            enqueued: 5000,
            delivered: 3796,
            acked: 3795,
            settings: None,
        };
        let totals =
            Totals { tasks: 1204, schedules: 1, enqueued: 5000, delivered: 3796, acked: 3795, ..Totals::default() };
        let rates = Rates { enqueued: 12.0, delivered: 11.5, acked: 11.0 };
        let overview = Overview {
            now_ms: 10_000,
            read_only_ui: false,
            queues: vec![OverviewQueue { queue, rates, can: vec!["read".into()] }],
            totals,
            server_wide: true,
            history: Vec::new(),
            sample_every_s: 1,
            nodes: None,
        };
        let text = queues(&overview);
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with("QUEUE   STATE   SCHEDULED"), "{text}");
        let row = lines.next().unwrap();
        for cell in ["emails", "paused", "1,200", "6s ago", "0.50ms", "2.25ms", "12.0", "11.5"] {
            assert!(row.contains(cell), "{cell} in {row}");
        }
        assert!(text.contains("1,204 tasks, 1 schedules; since start: 5,000 enqueued"), "{text}");
        let scoped = queues(&Overview { server_wide: false, ..overview.clone() });
        assert!(scoped.contains("1,204 tasks in the queues this token reads; since start: 5,000 enqueued"), "{scoped}");
        assert!(!text.contains("counters as of") && !text.contains("nodes"), "one process: exact, no nodes: {text}");
        let empty = Overview { queues: Vec::new(), ..overview };
        assert_eq!(queues(&empty), "no queues yet: add a task with `hourglass add QUEUE`\n");
    }

    #[test]
    fn several_nodes_are_listed_with_their_shards_and_the_counters_freshness() {
        let node = |name: &str, this, age, shards: &[u16]| Node {
            name: name.into(),
            this,
            heartbeat_ms: 10_000 - age,
            heartbeat_age_ms: age,
            shards: shards.to_vec(),
        };
        let queue = Queue {
            name: "emails".into(),
            scheduled: 1,
            due: 0,
            leased: 0,
            dead: 0,
            oldest_due_ms: None,
            lateness: Lateness::default(),
            paused: false,
            enqueued: 1,
            delivered: 0,
            acked: 0,
            settings: None,
        };
        let overview = Overview {
            now_ms: 10_000,
            read_only_ui: false,
            queues: vec![OverviewQueue { queue, rates: Rates::default(), can: vec!["read".into()] }],
            totals: Totals { tasks: 1, enqueued: 1, counters_as_of_ms: Some(9_600), ..Totals::default() },
            server_wide: true,
            history: Vec::new(),
            sample_every_s: 1,
            nodes: Some(vec![
                node("node-a", true, 400, &[0, 3, 6, 9, 12, 15]),
                node("b", false, 2_500, &[1, 4]),
                node("joining", false, 0, &[]),
            ]),
        };
        let text = queues(&overview);
        let tail: Vec<&str> = text.lines().skip_while(|line| !line.starts_with("1 tasks")).collect();
        assert_eq!(
            tail,
            [
                "1 tasks, 0 schedules; since start: 1 enqueued, 0 delivered, 0 acked, 0 dead",
                "counters as of 400ms ago, from every node",
                "",
                "3 nodes share the store:",
                "  node-a (this)  heartbeat 400ms ago  shards 0 3 6 9 12 15",
                "  b              heartbeat  2.5s ago  shards 1 4",
                "  joining        heartbeat       now  shards none",
            ],
            "{text}"
        );
        // A scoped token is told its queues' counters' freshness, no nodes
        // (the server sends none to it).
        let scoped = queues(&Overview { server_wide: false, nodes: None, ..overview });
        assert!(scoped.ends_with("acked\ncounters as of 400ms ago, from every node\n"), "{scoped}");
    }

    #[test]
    fn an_age_is_finer_under_a_minute() {
        assert_eq!(ago(10_000, 10_000), "now");
        assert_eq!(ago(11_000, 10_000), "now", "a clock ahead is no age");
        assert_eq!(ago(9_588, 10_000), "412ms ago");
        assert_eq!(ago(0, 59_900), "59.9s ago");
        assert_eq!(ago(0, 180_000), "3m ago");
    }
}
