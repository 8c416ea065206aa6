//! `hourglass tail QUEUE`: a line whenever the queue's counters move, with
//! what moved and the counts after, until Ctrl-C. It reads the queue's
//! counters (`GET /v1/queues/{queue}`) at a steady pace, so it works against
//! any server, through any proxy, and costs the server one read a look.

use std::time::Duration;

use serde_json::Value;

use crate::client::Client;
use crate::render;

/// The counters a line reports the changes of, as the server names them.
const MOVES: [&str; 3] = ["enqueued", "delivered", "acked"];
const COUNTS: [&str; 4] = ["scheduled", "due", "leased", "dead"];

/// One line for the change from `before` to `now`, or `None` if nothing moved.
pub fn line(before: &Value, now: &Value) -> Option<String> {
    let number = |value: &Value, name: &str| value[name].as_u64().unwrap_or(0);
    let mut moved: Vec<String> = MOVES
        .iter()
        .filter_map(|&name| {
            let delta = number(now, name).saturating_sub(number(before, name));
            (delta > 0).then(|| format!("+{delta} {name}"))
        })
        .collect();
    let died = number(now, "dead") as i64 - number(before, "dead") as i64;
    if died != 0 {
        moved.push(format!("{died:+} dead"));
    }
    if now["paused"] != before["paused"] {
        moved.push(if now["paused"].as_bool() == Some(true) { "paused".into() } else { "resumed".into() });
    }
    let counts_moved = COUNTS.iter().any(|name| now[name] != before[name]);
    if moved.is_empty() && !counts_moved {
        return None;
    }
    Some(format!("{:<40} {}", moved.join("  "), counts(now)))
}

/// A queue's counts per state: `scheduled 9  due 0  leased 1  dead 1`.
pub fn counts(queue: &Value) -> String {
    COUNTS.iter().map(|name| format!("{name} {}", render::count(&queue[*name]))).collect::<Vec<_>>().join("  ")
}

pub async fn follow(client: &Client, queue: &str, every: Duration) -> anyhow::Result<()> {
    if every < Duration::from_millis(100) {
        anyhow::bail!("--every must be at least 100ms");
    }
    let path = format!("/v1/queues/{queue}");
    let mut before = client.get(&path).await.map_err(|error| {
        error.context(format!("cannot follow {queue:?}: a queue exists once a task was added to it"))
    })?;
    let paused = if before["paused"].as_bool() == Some(true) { " (paused)" } else { "" };
    println!("following {queue}{paused}, Ctrl-C stops: {}", counts(&before));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let now = client.get(&path).await?;
        if let Some(line) = line(&before, &now) {
            let at = jiff::Zoned::now();
            println!("{}  {line}", at.strftime("%H:%M:%S%.3f"));
        }
        before = now;
    }
}

#[cfg(test)]
mod tests {
    use super::line;
    use serde_json::json;

    #[test]
    fn a_line_says_what_moved_and_the_counts_after() {
        let before = json!({ "enqueued": 10, "delivered": 4, "acked": 4, "scheduled": 6, "due": 0, "leased": 0, "dead": 0, "paused": false });
        assert_eq!(line(&before, &before), None, "nothing moved: no line");
        let now = json!({ "enqueued": 15, "delivered": 6, "acked": 5, "scheduled": 9, "due": 0, "leased": 1, "dead": 1, "paused": true });
        let text = line(&before, &now).unwrap();
        assert!(text.starts_with("+5 enqueued  +2 delivered  +1 acked  +1 dead  paused"), "{text}");
        assert!(text.ends_with("scheduled 9  due 0  leased 1  dead 1"), "{text}");
        // Tasks coming due move only the counts: still a line.
        let due = json!({ "enqueued": 10, "delivered": 4, "acked": 4, "scheduled": 5, "due": 1, "leased": 0, "dead": 0, "paused": false });
        assert!(line(&before, &due).unwrap().trim_start().starts_with("scheduled 5  due 1"));
    }
}
