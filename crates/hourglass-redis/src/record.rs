//! A task's record as the scripts store it (MessagePack, short field names:
//! see `lua/prelude.lua`), read back into a [`Task`].

use std::sync::Arc;

use rmpv::Value;

use hourglass_queue::{DeadReason, Lease, Status, Task, TaskState};
use hourglass_queue::{Failure, QueueError};

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
        Some("l") => TaskState::Leased { lease: stored_lease(shard, get("L"))?, until_ms: need("u")? },
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
        dead_reason: if get("X").is_some() { DeadReason::Expired } else { DeadReason::Attempts },
        last_error: text("E"),
        http: get("h").map(crate::push::target_of).transpose()?.map(Arc::new),
        state,
        created_ms: need("c")?,
    };
    Ok(Record { status: Status::of(&task, now_ms), task })
}

/// cmsgpack writes integral numbers as integers, and others as doubles.
pub(crate) fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Integer(n) => n.as_u64(),
        Value::F64(f) if *f >= 0.0 && f.fract() == 0.0 => Some(*f as u64),
        Value::F32(f) if *f >= 0.0 && f.fract() == 0.0 => Some(*f as u64),
        _ => None,
    }
}

/// A lease token as the scripts write it (`new_lease` in `lua/prelude.lua`):
/// 16 hex digits.
pub(crate) fn lease(token: &[u8]) -> Result<Lease, QueueError> {
    std::str::from_utf8(token)
        .ok()
        .filter(|text| text.len() == 16)
        .and_then(|text| u64::from_str_radix(text, 16).ok())
        .map(Lease)
        .ok_or_else(|| corrupt("L"))
}

/// A leased record's lease: its token, or in a store written before tokens
/// could not be guessed, the shard's lease counter (such a lease is shown
/// as it was, but no longer held: its ack is refused as stale, and the task
/// is delivered again when the lease runs out).
fn stored_lease(shard: u16, value: Option<&Value>) -> Result<Lease, QueueError> {
    match value {
        Some(Value::String(text)) => lease(text.as_bytes()),
        Some(value) => number(value).map(|counter| Lease(keys::id(shard, counter))).ok_or_else(|| corrupt("L")),
        None => Err(corrupt("L")),
    }
}

/// `lease` as the scripts compare it with a record's token.
pub(crate) fn token(lease: Lease) -> String {
    format!("{:016x}", lease.0)
}

/// A fresh secret for the lease tokens one script makes (`new_lease`): 128
/// random bits from the thread's CSPRNG, never stored.
pub(crate) fn lease_secret() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_read_as_the_scripts_write_it_and_as_older_stores_did() {
        let written = Value::String("00ff00ff00ff00ff".into());
        assert_eq!(stored_lease(3, Some(&written)).unwrap(), Lease(0x00ff_00ff_00ff_00ff));
        assert_eq!(token(Lease(0x00ff_00ff_00ff_00ff)), "00ff00ff00ff00ff");
        // Before: the shard's lease counter, shown as the counter and shard.
        assert_eq!(stored_lease(3, Some(&Value::from(7u64))).unwrap(), Lease(keys::id(3, 7)));
        for bad in ["00ff", "not hex digits!!", "00ff00ff00ff00ff0"] {
            assert!(stored_lease(3, Some(&Value::String(bad.into()))).is_err(), "{bad}");
        }
        assert!(stored_lease(3, None).is_err());
    }
}
