//! The Lua scripts, each the constants from Rust, the shared prelude and its
//! own body. Every script names every key it touches in `KEYS` (all of one
//! shard's hash tag, or the one global key) and reads the time from Redis
//! (`TIME`), never the caller's clock.
//!
//! What the scripts share with Rust is defined once, in Rust, and written
//! into each script as it is built ([`constants`]): the backoff after a
//! failed delivery ([`backoff_ms`], as a table of its values), the
//! attempts that mean no limit, the widths of the sets' members and a queue's
//! keys ([`keys`](crate::keys)).

use std::sync::LazyLock;

use redis::Script;

use hourglass_queue::limits::ATTEMPTS_UNLIMITED;
use hourglass_queue::retry::backoff_ms;

use crate::keys::{MS_DIGITS, PRIORITY_DIGITS, QUEUE_KEYS, SEQ_DIGITS};

const PRELUDE: &str = include_str!("lua/prelude.lua");

/// Why a claim script handed out fewer tasks than it was asked for: the
/// third item of its reply (`lua/claim.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimStop {
    /// Nothing more of the queue is due in the shard (or it handed out all
    /// it was asked for).
    Drained = 0,
    /// The next task's payload would have passed the bytes it was given.
    Bytes = 1,
    /// It looked at its most tasks (dead ones met past their expiry among
    /// them): more may be due.
    Scanned = 2,
}

impl ClaimStop {
    pub(crate) fn from_reply(code: u64) -> Option<ClaimStop> {
        [ClaimStop::Drained, ClaimStop::Bytes, ClaimStop::Scanned].into_iter().find(|stop| *stop as u64 == code)
    }
}

/// Attempts past which [`backoff_ms`] is looked for no further: it stops
/// growing long before (it doubles from a second to its cap of an hour).
const BACKOFF_ATTEMPTS_MAX: u32 = 64;

/// The scripts, loaded once (each is sent by its SHA1, and again whole if a
/// restarted Redis has forgotten it).
pub(crate) struct Scripts {
    pub(crate) enqueue: Script,
    pub(crate) claim: Script,
    pub(crate) task: Script,
    pub(crate) acks: Script,
    pub(crate) fire: Script,
    pub(crate) read: Script,
    pub(crate) counts: Script,
    pub(crate) dead: Script,
    pub(crate) shard_lease: Script,
    pub(crate) node: Script,
    pub(crate) queues: Script,
    pub(crate) settings: Script,
    pub(crate) flow: Script,
    pub(crate) schedule: Script,
}

/// [`backoff_ms`] of attempts 1, 2, ... until it stops growing: the last is
/// the backoff of every later attempt.
fn backoffs_ms() -> Vec<u64> {
    let mut backoffs = vec![backoff_ms(1)];
    for attempt in 2..=BACKOFF_ATTEMPTS_MAX {
        let ms = backoff_ms(attempt);
        if Some(&ms) == backoffs.last() {
            return backoffs;
        }
        backoffs.push(ms);
    }
    panic!("retry::backoff_ms still grows at attempt {BACKOFF_ATTEMPTS_MAX}: {backoffs:?}");
}

/// The Lua that every script starts with: what the prelude and the scripts
/// share with Rust, from its one definition here.
fn constants() -> String {
    let queue_keys: Vec<String> =
        QUEUE_KEYS.iter().enumerate().map(|(at, name)| format!("{name} = KEYS[first + {at}]")).collect();
    let backoffs: Vec<String> = backoffs_ms().iter().map(u64::to_string).collect();
    format!(
        "-- Written by scripts.rs from the Rust definitions.
local ATTEMPTS_UNLIMITED = {ATTEMPTS_UNLIMITED}
local SEQ_DIGITS, MS_DIGITS, PRIORITY_DIGITS = {SEQ_DIGITS}, {MS_DIGITS}, {PRIORITY_DIGITS}
local QUEUE_KEY_COUNT = {count}
local STOP_DRAINED, STOP_BYTES, STOP_SCANNED = {drained}, {bytes}, {scanned}
-- A queue's keys, from KEYS[first].
local function queue_keys(first)
  return {{ {queue_keys} }}
end
-- The backoff after failed attempt `attempt` (hourglass_queue::retry::backoff_ms).
local backoffs_ms
local function backoff_ms(attempt)
  backoffs_ms = backoffs_ms or {{ {backoffs} }}
  return backoffs_ms[math.max(1, math.min(attempt, #backoffs_ms))]
end
",
        count = QUEUE_KEYS.len(),
        drained = ClaimStop::Drained as u8,
        bytes = ClaimStop::Bytes as u8,
        scanned = ClaimStop::Scanned as u8,
        queue_keys = queue_keys.join(", "),
        backoffs = backoffs.join(", "),
    )
}

/// A script: the constants, the prelude and `body`.
fn script(body: &str) -> Script {
    Script::new(&format!("{}{PRELUDE}\n{body}", constants()))
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    enqueue: script(include_str!("lua/enqueue.lua")),
    claim: script(include_str!("lua/claim.lua")),
    task: script(include_str!("lua/task.lua")),
    acks: script(include_str!("lua/acks.lua")),
    fire: script(include_str!("lua/fire.lua")),
    read: script(include_str!("lua/read.lua")),
    counts: script(include_str!("lua/counts.lua")),
    dead: script(include_str!("lua/dead.lua")),
    shard_lease: script(include_str!("lua/shard.lease.lua")),
    node: script(include_str!("lua/node.lua")),
    queues: script(include_str!("lua/queues.lua")),
    settings: script(include_str!("lua/settings.lua")),
    flow: script(include_str!("lua/flow.lua")),
    schedule: script(include_str!("lua/schedule.lua")),
});

#[cfg(test)]
mod tests {
    use hourglass_queue::limits::MAX_ATTEMPTS_MAX;
    use hourglass_test_support::redis::Server;

    use super::*;
    use crate::conn::{Conn, Target};
    use crate::keys;

    #[test]
    fn the_table_of_backoffs_is_backoff_ms() {
        let table = backoffs_ms();
        for attempt in 1..=1_000 {
            let at = (attempt as usize).clamp(1, table.len());
            assert_eq!(table[at - 1], backoff_ms(attempt), "attempt {attempt}");
        }
    }

    /// The prelude's `fail` and members, run by a real Redis, against Rust's.
    #[tokio::test]
    async fn lua_and_rust_agree_on_the_backoff_and_the_members() {
        let Some(server) = Server::start() else { return };
        let mut conn = Conn::open(&Target::One(server.url()), None).await.unwrap();
        let backoffs = script(
            "local out = {}
            for a = 1, tonumber(ARGV[1]) do
              local rec = { a = a, m = tonumber(ARGV[2]), s = 'l', L = 1, u = 5, r = 0 }
              fail(rec, 1000, nil)
              table.insert(out, rec.r - 1000)
            end
            return out",
        );
        let lua: Vec<u64> = backoffs.arg(40).arg(MAX_ATTEMPTS_MAX).invoke_async(&mut conn).await.unwrap();
        let rust: Vec<u64> = (1..=40).map(backoff_ms).collect();
        assert_eq!(lua, rust);
        let unlimited: Vec<u64> = backoffs.arg(3).arg(ATTEMPTS_UNLIMITED).invoke_async(&mut conn).await.unwrap();
        assert_eq!(unlimited, [0, 0, 0], "without a limit, due again at once");

        let members = script(
            "local ms, seq, pri = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
            local ready = ready_member(pri, ms, seq)
            return { field(seq), at_member(ms, seq), ready, ready_at(ready), member_seq(ready), member_ms(at_member(ms, seq)) }",
        );
        for (ms, seq, priority) in [(0, 1, 0), (1_764_547_200_123, keys::SEQ_MAX, u32::MAX), (86_400_000, 77, 1_024)] {
            let lua: (String, String, String, String, u64, u64) =
                members.arg(ms).arg(seq).arg(priority).invoke_async(&mut conn).await.unwrap();
            let at = keys::at_member(ms, seq);
            assert_eq!(lua, (keys::field(seq), at.clone(), keys::ready_member(priority, ms, seq), at, seq, ms));
        }

        let queue_keys = script("local Q = queue_keys(2) return { Q.s, Q.r, Q.o, Q.l, Q.d, Q.k, Q.R, Q.P }");
        let mut invocation = queue_keys.key("{t}:first");
        for name in QUEUE_KEYS {
            invocation.key(format!("{{t}}:{name}"));
        }
        let lua: Vec<String> = invocation.invoke_async(&mut conn).await.unwrap();
        assert_eq!(lua, QUEUE_KEYS.map(|name| format!("{{t}}:{name}")));
    }
}
