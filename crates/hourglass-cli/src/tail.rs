//! `hourglass tail QUEUE`: a line whenever the queue's counters move, with
//! what moved and the counts after, until Ctrl-C. It reads the queue's
//! counters (`GET /v1/queues/{queue}`) at a steady pace, so it works against
//! any server, through any proxy, and costs the server one read a look.

use std::time::Duration;

use anyhow::Context;
use hourglass_client::wire::Queue;
use hourglass_client::Client;

use crate::client::Explain;
use crate::render;

/// A counter of a queue, by the name the line gives it.
type Counter = (&'static str, fn(&Queue) -> u64);

/// The counters that only go up: a line says how much each moved.
const MOVES: [Counter; 3] = [("enqueued", |q| q.enqueued), ("delivered", |q| q.delivered), ("acked", |q| q.acked)];
/// The counts per state: a line ends with them.
const COUNTS: [Counter; 4] =
    [("scheduled", |q| q.scheduled), ("due", |q| q.due), ("leased", |q| q.leased), ("dead", |q| q.dead)];

/// Looks at most this often.
const EVERY_MIN: Duration = Duration::from_millis(100);

/// One line for the change from `before` to `now`, or `None` if nothing moved.
pub fn line(before: &Queue, now: &Queue) -> Option<String> {
    let mut moved: Vec<String> = MOVES
        .iter()
        .filter_map(|(name, of)| {
            let delta = of(now).saturating_sub(of(before));
            (delta > 0).then(|| format!("+{delta} {name}"))
        })
        .collect();
    let died = now.dead as i64 - before.dead as i64;
    if died != 0 {
        moved.push(format!("{died:+} dead"));
    }
    if now.paused != before.paused {
        moved.push(if now.paused { "paused".into() } else { "resumed".into() });
    }
    let counts_moved = COUNTS.iter().any(|(_, of)| of(now) != of(before));
    if moved.is_empty() && !counts_moved {
        return None;
    }
    Some(format!("{:<40} {}", moved.join("  "), counts(now)))
}

/// A queue's counts per state: `scheduled 9  due 0  leased 1  dead 1`.
pub fn counts(queue: &Queue) -> String {
    COUNTS.iter().map(|(name, of)| format!("{name} {}", render::count(of(queue)))).collect::<Vec<_>>().join("  ")
}

/// Prints a line each `every` that `queue` moved, until Ctrl-C.
pub async fn follow(client: &Client, queue: &str, every: Duration) -> anyhow::Result<()> {
    if every < EVERY_MIN {
        anyhow::bail!("--every must be at least {EVERY_MIN:?}");
    }
    let mut before = client
        .queue(queue)
        .await
        .explain(client)
        .with_context(|| format!("cannot follow {queue:?}: a queue exists once a task was added to it"))?;
    let paused = if before.paused { " (paused)" } else { "" };
    println!("following {queue}{paused}, Ctrl-C stops: {}", counts(&before));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let now = client.queue(queue).await.explain(client)?;
        if let Some(line) = line(&before, &now) {
            println!("{}  {line}", render::time_of_day(crate::now_ms()));
        }
        before = now;
    }
}

#[cfg(test)]
mod tests {
    use super::line;
    use hourglass_client::wire::{Lateness, Queue};

    /// A queue with these counters: enqueued, delivered, acked; scheduled,
    /// due, leased, dead.
    fn queue(moves: [u64; 3], counts: [u64; 4], paused: bool) -> Queue {
        let ([enqueued, delivered, acked], [scheduled, due, leased, dead]) = (moves, counts);
        Queue {
            name: "q".into(),
            scheduled,
            due,
            leased,
            dead,
            oldest_due_ms: None,
            lateness: Lateness::default(),
            paused,
            enqueued,
            delivered,
            acked,
            settings: None,
        }
    }

    #[test]
    fn a_line_says_what_moved_and_the_counts_after() {
        let before = queue([10, 4, 4], [6, 0, 0, 0], false);
        assert_eq!(line(&before, &before), None, "nothing moved: no line");
        let now = queue([15, 6, 5], [9, 0, 1, 1], true);
        let text = line(&before, &now).unwrap();
        assert!(text.starts_with("+5 enqueued  +2 delivered  +1 acked  +1 dead  paused"), "{text}");
        assert!(text.ends_with("scheduled 9  due 0  leased 1  dead 1"), "{text}");
        // Tasks coming due move only the counts: still a line.
        let due = queue([10, 4, 4], [5, 1, 0, 0], false);
        assert!(line(&before, &due).unwrap().trim_start().starts_with("scheduled 5  due 1"));
    }
}
