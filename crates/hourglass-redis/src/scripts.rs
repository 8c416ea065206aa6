//! The Lua scripts, each the shared prelude and its own body. Every script
//! names every key it touches in `KEYS` (all of one shard's hash tag, or the
//! one global key) and reads the time from Redis (`TIME`), never the caller's
//! clock.

use std::sync::LazyLock;

use redis::Script;

use hourglass_queue::limits::{BACKOFF_BASE_MS, BACKOFF_MAX_MS};

const PRELUDE: &str = include_str!("lua/prelude.lua");

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
    pub(crate) queues: Script,
}

fn script(body: &str) -> Script {
    let prelude = PRELUDE
        .replace("BACKOFF_BASE_MS", &BACKOFF_BASE_MS.to_string())
        .replace("BACKOFF_MAX_MS", &BACKOFF_MAX_MS.to_string());
    Script::new(&format!("{prelude}\n{body}"))
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
    queues: script(include_str!("lua/queues.lua")),
});
