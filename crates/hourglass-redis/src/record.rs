//! A task's record as the scripts store it (MessagePack, short field names:
//! see `lua/prelude.lua`), read back into a [`Task`].

use std::sync::Arc;

use rmpv::Value;

use hourglass_queue::{Failure, QueueError};
use hourglass_queue::{Lease, Status, Task, TaskState};

use crate::keys;

/// A record the scripts wrote, decoded.
pub(crate) struct Record {
    pub(crate) task: Task,
    /// Its status when it was read: due once its due time has passed,
    /// though its shard's owner may not have filed it as due yet.
    pub(crate) status: Status,
}

/// What a malformed record says: which field is wrong.
fn corrupt(what: &str) -> QueueError {
    QueueError::Storage(Failure::msg(format!("a task record in Redis is malformed: {what}")))
}

/// Decodes the record of task `seq` of `shard`, read at `now_ms` (Redis's time).
pub(crate) fn decode(shard: u16, seq: u64, raw: &[u8], now_ms: u64) -> Result<Record, QueueError> {
    let value = rmpv::decode::read_value(&mut &raw[..])
        .map_err(|e| QueueError::Storage(Failure::new("a task record in Redis is malformed", e)))?;
    let Value::Map(fields) = value else { return Err(corrupt("not a map")) };
    let get = |name: &str| fields.iter().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v);
    let number = |name: &str| get(name).and_then(number);
    let text = |name: &str| get(name).and_then(|v| v.as_str()).map(Box::<str>::from);
    let need = |name: &str| number(name).ok_or_else(|| corrupt(name));
    let queue: Arc<str> = text("q").ok_or_else(|| corrupt("q"))?.into();
    let run_at_ms = need("r")?;
    let state = match text("s").as_deref() {
        Some("s") => TaskState::Scheduled,
        Some("d") => TaskState::Dead,
        Some("l") => TaskState::Leased { lease: lease(shard, need("L")?), until_ms: need("u")? },
        _ => return Err(corrupt("s")),
    };
    let small = |v: u64| u32::try_from(v).map_err(|_| corrupt("a field past 32 bits"));
    let task = Task {
        id: keys::id(shard, seq),
        queue,
        run_at_ms,
        attempt: small(need("a")?)?,
        max_attempts: small(need("m")?)?,
        priority: small(need("p")?)?,
        lease_ms: number("l").map(small).transpose()?,
        key: text("k"),
        every_ms: number("e"),
        expires_at_ms: number("x"),
        expired: get("X").is_some(),
        last_error: text("E"),
        http: get("h").map(crate::push::target_of).transpose()?.map(Arc::new),
        state,
        created_ms: need("c")?,
    };
    Ok(Record { status: Status::of(&task, now_ms), task })
}

/// cmsgpack writes integral numbers as integers, and others as doubles.
fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Integer(n) => n.as_u64(),
        Value::F64(f) if *f >= 0.0 && f.fract() == 0.0 => Some(*f as u64),
        Value::F32(f) if *f >= 0.0 && f.fract() == 0.0 => Some(*f as u64),
        _ => None,
    }
}

/// A lease is the shard's lease counter and the shard: unique across shards.
pub(crate) fn lease(shard: u16, token: u64) -> Lease {
    Lease(keys::id(shard, token))
}

/// The shard's lease counter in `lease`, as a script takes it: `-1`, which
/// no lease holds, if `lease` is not of `shard`.
pub(crate) fn token(lease: Lease, shard: u16) -> String {
    keys::split(lease.0, keys::SHARDS_MAX)
        .filter(|&(of, _)| of == shard)
        .map_or_else(|| "-1".to_owned(), |(_, token)| token.to_string())
}
