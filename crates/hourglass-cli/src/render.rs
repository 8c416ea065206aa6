//! What the commands print for people: tables of queues, a task's fields,
//! durations and times. `--json` prints the server's answer instead, for
//! scripts.

use std::fmt::Write;

use serde_json::Value;

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
pub fn count(value: &Value) -> String {
    let Some(n) = value.as_u64() else { return "-".into() };
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
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
    i64::try_from(at_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| at_ms.to_string(), |t| format!("{t:.3}"))
}

/// A time with how far it is from now: `2026-11-30T12:00:00.000Z (in 5m)`.
pub fn when(at_ms: &Value, now_ms: u64) -> Option<String> {
    let at_ms = at_ms.as_u64()?;
    Some(format!("{} ({})", instant(at_ms), relative(at_ms, now_ms)))
}

/// The server's queues and totals (`/v1/overview`) as a table.
pub fn queues(overview: &Value) -> String {
    let now_ms = overview["now_ms"].as_u64().unwrap_or_default();
    let queues = overview["queues"].as_array().map(Vec::as_slice).unwrap_or_default();
    if queues.is_empty() {
        return "no queues yet: add a task with `hourglass add QUEUE`\n".into();
    }
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| {
            let late = |p: &str| {
                if q["lateness"]["samples"].as_u64().unwrap_or(0) == 0 {
                    "-".into()
                } else {
                    millis(q["lateness"][p].as_f64().unwrap_or(0.0))
                }
            };
            let rate = |name: &str| format!("{:.1}", q["rates"][name].as_f64().unwrap_or(0.0));
            vec![
                q["name"].as_str().unwrap_or("?").to_owned(),
                if q["paused"].as_bool() == Some(true) { "paused".into() } else { "running".into() },
                count(&q["scheduled"]),
                count(&q["due"]),
                count(&q["leased"]),
                count(&q["dead"]),
                q["oldest_due_ms"].as_u64().map_or_else(|| "-".into(), |at| relative(at, now_ms)),
                late("p50"),
                late("p99"),
                rate("enqueued"),
                rate("delivered"),
                rate("acked"),
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
    let t = &overview["totals"];
    let mut out = table(&header, &rows);
    let _ = writeln!(
        out,
        "\n{} tasks, {} schedules; since start: {} enqueued, {} delivered, {} acked, {} dead",
        count(&t["tasks"]),
        count(&t["schedules"]),
        count(&t["enqueued"]),
        count(&t["delivered"]),
        count(&t["acked"]),
        count(&t["died"]),
    );
    out
}

/// A task (`GET /v1/tasks/{id}`) as aligned fields, then its payload.
pub fn task(task: &Value, now_ms: u64) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("id", count(&task["id"]).replace(',', "")),
        ("queue", task["queue"].as_str().unwrap_or("?").to_owned()),
        ("state", task["state"].as_str().unwrap_or("?").to_owned()),
    ];
    if let Some(reason) = task["dead_reason"].as_str() {
        fields.push(("dead reason", reason.to_owned()));
    }
    if let Some(error) = task["last_error"].as_str() {
        fields.push(("last error", error.to_owned()));
    }
    fields.extend(when(&task["run_at_ms"], now_ms).map(|due| ("due", due)));
    fields.push(("attempts", format!("{} of {}", task["attempt"], task["max_attempts"])));
    if let Some(key) = task["key"].as_str() {
        fields.push(("key", key.to_owned()));
    }
    if let Some(every_ms) = task["every_ms"].as_u64() {
        fields.push(("repeats every", millis(every_ms as f64)));
    }
    fields.extend(when(&task["lease_until_ms"], now_ms).map(|at| ("lease until", at)));
    fields.extend(when(&task["expires_at_ms"], now_ms).map(|at| ("expires", at)));
    fields.extend(when(&task["created_ms"], now_ms).map(|at| ("created", at)));
    let width = fields.iter().map(|(name, _)| name.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (name, value) in fields {
        let _ = writeln!(out, "{:<width$} {value}", format!("{name}:"));
    }
    let payload = serde_json::to_string_pretty(&task["payload"]).unwrap_or_else(|_| task["payload"].to_string());
    let _ = writeln!(out, "payload:\n{payload}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_table_pads_columns_and_right_aligns_numbers() {
        let text = table(&["QUEUE", "DUE"], &[vec!["emails".into(), "1,204".into()], vec!["a".into(), "3".into()]]);
        assert_eq!(text, "QUEUE     DUE\nemails  1,204\na           3\n");
    }

    #[test]
    fn counts_times_and_durations_read_as_people_write_them() {
        assert_eq!(count(&json!(1_234_567)), "1,234,567");
        assert_eq!(count(&json!(12)), "12");
        assert_eq!(count(&json!(null)), "-");
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
    fn a_task_prints_every_field_it_has_and_its_payload() {
        let now_ms = 1_800_000_000_000;
        let task = json!({
            "id": 42, "queue": "emails", "state": "dead", "dead_reason": "attempts", "last_error": "SMTP 550",
            "run_at_ms": now_ms - 60_000, "attempt": 5, "max_attempts": 5, "key": "order-7",
            "created_ms": now_ms - 120_000, "payload": { "to": "a@example.com" }
        });
        let text = super::task(&task, now_ms);
        assert!(text.contains("id:          42\n"), "{text}");
        assert!(text.contains("dead reason: attempts\n"), "{text}");
        assert!(text.contains("last error:  SMTP 550\n"), "{text}");
        assert!(text.contains("attempts:    5 of 5\n"), "{text}");
        assert!(text.contains("due:         2027-01-15T07:59:00.000Z (1m ago)\n"), "{text}");
        assert!(text.ends_with("payload:\n{\n  \"to\": \"a@example.com\"\n}\n"), "{text}");
        assert!(!text.contains("lease until"), "absent fields are left out: {text}");
    }

    #[test]
    fn the_queues_table_has_a_row_per_queue_and_the_totals() {
        let overview = json!({
            "now_ms": 10_000,
            "queues": [{ "name": "emails", "paused": true, "scheduled": 1200, "due": 3, "leased": 1, "dead": 0,
                         "oldest_due_ms": 4_000, "lateness": { "samples": 10, "p50": 0.5, "p99": 2.25 },
                         "rates": { "enqueued": 12.0, "delivered": 11.5, "acked": 11.0 } }],
            "totals": { "tasks": 1204, "schedules": 1, "enqueued": 5000, "delivered": 3796, "acked": 3795, "died": 0 }
        });
        let text = queues(&overview);
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with("QUEUE   STATE   SCHEDULED"), "{text}");
        let row = lines.next().unwrap();
        for cell in ["emails", "paused", "1,200", "6s ago", "0.50ms", "2.25ms", "12.0", "11.5"] {
            assert!(row.contains(cell), "{cell} in {row}");
        }
        assert!(text.contains("1,204 tasks, 1 schedules; since start: 5,000 enqueued"), "{text}");
        assert_eq!(queues(&json!({ "queues": [] })), "no queues yet: add a task with `hourglass add QUEUE`\n");
    }
}
