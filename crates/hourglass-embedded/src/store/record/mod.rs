//! The on-disk encoding of a task: a *body*, written once when the task is
//! enqueued and holding its payload if small, and, once the task has changed (a claim,
//! a nack, a lease expiry, a reschedule), a small *state* record under the
//! same id in a second table. A change rewrites the 12-byte state, never the
//! body or the payload; a task that never changes costs one entry, as before.
//!
//! Body (table `tasks`):
//!
//! ```text
//! offset size  field
//!      0    1  format version (3)
//!      1    1  flags: bit 0 dead (else scheduled: a lease is not kept across
//!              restarts), bit 1 repeats (every_ms follows), bit 2 the payload
//!              is kept apart, bit 3 expires (expires_at_ms follows), bit 4
//!              a priority follows, bit 5 the task's own lease follows, bit
//!              6 an HTTP target follows; no other bit is set
//!      2    8  run_at_ms        u64 LE
//!     10    8  created_ms       u64 LE
//!     18    2  attempt          u16 LE (attempts are at most MAX_ATTEMPTS_MAX)
//!     20    2  max_attempts     u16 LE
//!     22   (8) every_ms         u64 LE, not 0; only if the task repeats
//!          (8) expires_at_ms    u64 LE; only if the task expires
//!          (4) priority         u32 LE; only with bit 4 (else 1024, the default)
//!          (4) lease_ms         u32 LE; only with bit 5
//!          (.) the HTTP target, as `target_record` writes it; only with bit 6
//!           2  queue length q   u16 LE, then q bytes of UTF-8
//!           2  key length k     u16 LE, 0xFFFF = no key, then k bytes of UTF-8
//!           4  payload length p u32 LE, then the p bytes, unless the
//!              payload is kept apart (any bytes; stores written before
//!              payloads were bytes held UTF-8 text here, read the same)
//!           4  CRC-32 of every byte before it, u32 LE
//! ```
//!
//! A payload larger than [`PAYLOAD_INLINE_MAX`](hourglass_queue::limits::PAYLOAD_INLINE_MAX) is kept apart, in a third
//! table (`payloads`, id to the bytes), so that loading the bodies at a start
//! reads only what scheduling needs. Bodies written before that flag existed
//! hold payloads of any size; they are still read. A payload kept apart is its
//! bytes followed by their CRC-32 (u32 LE).
//!
//! Version 2 bodies are version 3 without the CRC and without payloads apart.
//! Version 1 bodies have a state byte (0 scheduled, 1 dead) in place of the
//! flags, `u32` attempts, and an `every_ms` that is always there (0 = does not
//! repeat). Both are still read.
//!
//! State (table `states`), which overrides the body's first three fields:
//!
//! ```text
//! offset size  field
//!      0    1  format version (2)
//!      1    1  flags: bit 0 dead, bit 1 dead because it expired (only
//!              with bit 0), bit 2 the body's expiry no longer holds (the
//!              task was retried, or never had one), bit 3 a last error
//!              follows, bit 4 a priority follows (else the default, 1024),
//!              bit 5 dead because its payload was found damaged (only with
//!              bit 0, never with bit 1); no other bit is set
//!      2    8  run_at_ms        u64 LE
//!     10    2  attempt          u16 LE
//!     12   (4) priority         u32 LE; only with bit 4
//!          (2) error length e   u16 LE, then e bytes of UTF-8; only with bit 3
//!           4  CRC-32 of every byte before it, u32 LE
//! ```
//!
//! (Bits 3 to 5 came later, within version 2, as did the body's bits 4 to
//! 6: a record without them is as before. A task's priority can change, so
//! the state's overrides the body's.)
//!
//! Version 1 states are version 2 without the CRC; they are still read.
//!
//! redb checksums its pages, but verifies them only when it repairs a file
//! after an unclean shutdown (or on a full check); so every record carries a
//! CRC-32 of its own, verified whenever it is read. This layer also checks
//! every length and every string, and a record that does not decode exactly is
//! reported as corrupt, never guessed at.

use std::sync::Arc;

use hourglass_queue::limits::PRIORITY_DEFAULT;
use hourglass_queue::DeadReason;
#[cfg(test)]
use hourglass_queue::Lease;
use hourglass_queue::{Task, TaskState};

use super::sealed::{seal, unseal, Reader, CRC_BYTES};
use super::target_record;

const VERSION: u8 = 3;
/// Bodies without a CRC and without payloads apart.
const VERSION_2: u8 = 2;
/// Bodies with a state byte, `u32` attempts and an `every_ms` always there.
const VERSION_1: u8 = 1;
const STATE_VERSION: u8 = 2;
/// States without a CRC.
const STATE_VERSION_1: u8 = 1;
const NO_KEY: u16 = u16::MAX;
const FIXED_BYTES: usize = 22;
/// The size of a state record.
pub(crate) const STATE_BYTES: usize = 12 + CRC_BYTES;
const FLAG_DEAD: u8 = 1;
const FLAG_REPEATS: u8 = 2;
const FLAG_APART: u8 = 4;
const FLAG_EXPIRES: u8 = 8;
/// In a state record: dead because it expired.
const FLAG_EXPIRED: u8 = 2;
/// In a state record: the body's expiry no longer holds (the task was retried).
const FLAG_NO_EXPIRY: u8 = 4;
/// In a state record: the task's last error follows its attempts.
const FLAG_ERROR: u8 = 8;
/// In a body or a state record: the task's priority follows.
const FLAG_PRIORITY: u8 = 16;
/// In a state record: dead because its payload was found damaged.
const FLAG_CORRUPT: u8 = 32;
/// In a body: the task's own lease follows.
const FLAG_LEASE: u8 = 32;
/// In a body: the task's HTTP target follows.
const FLAG_TARGET: u8 = 64;
const _: () =
    assert!(hourglass_queue::limits::NACK_REASON_BYTES_MAX < u16::MAX as usize, "an error's length fits in a u16");
const _: () = assert!(hourglass_queue::limits::MAX_ATTEMPTS_MAX <= u16::MAX as u32, "attempts fit in a u16");

/// Attempts, bounded by `MAX_ATTEMPTS_MAX` (asserted above), so never saturated.
fn attempts(n: u32) -> [u8; 2] {
    u16::try_from(n).unwrap_or(u16::MAX).to_le_bytes()
}

fn dead_flag(task: &Task) -> u8 {
    if task.state == TaskState::Dead {
        FLAG_DEAD
    } else {
        0
    }
}

/// A state record's flags: dead, why, and whether the body's expiry still holds.
fn state_flags(task: &Task) -> u8 {
    dead_flag(task)
        | match (task.state, task.dead_reason) {
            (TaskState::Dead, DeadReason::Expired) => FLAG_EXPIRED,
            (TaskState::Dead, DeadReason::Corrupt) => FLAG_CORRUPT,
            _ => 0,
        }
        | if task.expires_at_ms.is_none() { FLAG_NO_EXPIRY } else { 0 }
        | if task.last_error.is_some() { FLAG_ERROR } else { 0 }
        | priority_flag(task)
}

fn priority_flag(task: &Task) -> u8 {
    if task.priority == PRIORITY_DEFAULT {
        0
    } else {
        FLAG_PRIORITY
    }
}

/// Whether a payload of this size is kept apart from its body: one too large
/// to be kept in memory.
pub(crate) fn apart(payload_bytes: usize) -> bool {
    !hourglass_queue::limits::payload_inline(payload_bytes)
}

/// The sizes a task's stored bytes depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub(crate) queue: usize,
    pub(crate) key: Option<usize>,
    pub(crate) repeats: bool,
    pub(crate) payload: usize,
    /// The encoded bytes of its HTTP target; 0 without one.
    pub(crate) target: usize,
}

impl Sizes {
    pub(crate) fn of(task: &Task, payload_bytes: usize) -> Sizes {
        Sizes {
            queue: task.queue.len(),
            key: task.key.as_deref().map(str::len),
            repeats: task.every_ms.is_some(),
            payload: payload_bytes,
            target: task.http.as_deref().map_or(0, target_record::encoded_bytes),
        }
    }
}

/// Whether `body` says its payload is kept apart; no other part of it is
/// read (a delete asks, to know whether there is a payload to delete too).
pub(crate) fn keeps_payload_apart(body: &[u8]) -> bool {
    body.first() == Some(&VERSION) && body.get(1).is_some_and(|flags| flags & FLAG_APART != 0)
}

/// Where a body says its task's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PayloadIn<'a> {
    /// In the body.
    Body(&'a [u8]),
    /// Apart, this many bytes.
    Apart(usize),
}

/// The size of the body [`encode`] writes for a task of these sizes (8
/// bytes more if it expires).
pub(crate) fn body_bytes(sizes: Sizes) -> usize {
    let names = sizes.queue + sizes.key.unwrap_or(0);
    // An expiry's 8 bytes are left out: a retry lifts the expiry while the
    // body keeps them, and the budgets would have to follow.
    let every = if sizes.repeats { 8 } else { 0 };
    let inline = if apart(sizes.payload) { 0 } else { sizes.payload };
    FIXED_BYTES + every + 2 + 2 + 4 + names + inline + sizes.target + CRC_BYTES
}

/// The bytes [`encode_payload`] writes for a payload of `payload_bytes`.
pub(crate) fn stored_payload_bytes(payload_bytes: usize) -> usize {
    payload_bytes + CRC_BYTES
}

/// A payload kept apart, as stored: its bytes and their CRC-32.
pub(crate) fn encode_payload(payload: &(impl AsRef<[u8]> + ?Sized)) -> Vec<u8> {
    let payload = payload.as_ref();
    let mut out = Vec::with_capacity(payload.len() + CRC_BYTES);
    out.extend_from_slice(payload);
    seal(&mut out);
    out
}

/// A payload kept apart, checked against its CRC-32.
pub(crate) fn decode_payload(bytes: &[u8]) -> Result<&[u8], String> {
    unseal(bytes)
}

/// The body of a new task, with its payload unless that is kept
/// [`apart`].
pub(crate) fn encode(task: &Task, payload: &(impl AsRef<[u8]> + ?Sized)) -> Vec<u8> {
    let payload = payload.as_ref();
    let key = task.key.as_deref();
    let payload_apart = apart(payload.len());
    let inline = if payload_apart { 0 } else { payload.len() };
    let target = task.http.as_deref().map_or(0, target_record::encoded_bytes);
    let mut out =
        Vec::with_capacity(FIXED_BYTES + 8 + 8 + 8 + task.queue.len() + key.map_or(0, str::len) + inline + target);
    out.push(VERSION);
    out.push(
        dead_flag(task)
            | if task.every_ms.is_some() { FLAG_REPEATS } else { 0 }
            | if payload_apart { FLAG_APART } else { 0 }
            | if task.expires_at_ms.is_some() { FLAG_EXPIRES } else { 0 }
            | priority_flag(task)
            | if task.lease_ms.is_some() { FLAG_LEASE } else { 0 }
            | if task.http.is_some() { FLAG_TARGET } else { 0 },
    );
    out.extend_from_slice(&task.run_at_ms.to_le_bytes());
    out.extend_from_slice(&task.created_ms.to_le_bytes());
    out.extend_from_slice(&attempts(task.attempt));
    out.extend_from_slice(&attempts(task.max_attempts));
    if let Some(every_ms) = task.every_ms {
        out.extend_from_slice(&every_ms.to_le_bytes());
    }
    if let Some(expires_at_ms) = task.expires_at_ms {
        out.extend_from_slice(&expires_at_ms.to_le_bytes());
    }
    if task.priority != PRIORITY_DEFAULT {
        out.extend_from_slice(&task.priority.to_le_bytes());
    }
    if let Some(lease_ms) = task.lease_ms {
        out.extend_from_slice(&lease_ms.to_le_bytes());
    }
    if let Some(target) = &task.http {
        target_record::encode(&mut out, target);
    }
    put_names_and_payload(&mut out, task, payload, !payload_apart);
    seal(&mut out);
    out
}

/// The variable part every body version ends with: queue, key and payload,
/// each after its length (the payload's bytes only if `in_body`). Lengths are
/// bounded by the engine's limits, far below these fields' ranges.
fn put_names_and_payload(out: &mut Vec<u8>, task: &Task, payload: &[u8], in_body: bool) {
    out.extend_from_slice(&(task.queue.len() as u16).to_le_bytes());
    out.extend_from_slice(task.queue.as_bytes());
    match task.key.as_deref() {
        None => out.extend_from_slice(&NO_KEY.to_le_bytes()),
        Some(key) => {
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
        }
    }
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    if in_body {
        out.extend_from_slice(payload);
    }
}

/// A task and where its payload is, from its body.
pub(crate) fn decode(id: u64, bytes: &[u8]) -> Result<(Task, PayloadIn<'_>), String> {
    let bytes = if bytes.first() == Some(&VERSION) { unseal(bytes)? } else { bytes };
    let mut reader = Reader { bytes, at: 0 };
    let version = reader.u8()?;
    let mut payload_apart = false;
    let mut expires = false;
    let (mut has_priority, mut has_lease, mut has_target) = (false, false, false);
    let known = FLAG_DEAD | FLAG_REPEATS | FLAG_APART | FLAG_EXPIRES | FLAG_PRIORITY | FLAG_LEASE | FLAG_TARGET;
    let (dead, repeats) = match (version, reader.u8()?) {
        (VERSION, flags) if flags & !known == 0 => {
            payload_apart = flags & FLAG_APART != 0;
            expires = flags & FLAG_EXPIRES != 0;
            has_priority = flags & FLAG_PRIORITY != 0;
            has_lease = flags & FLAG_LEASE != 0;
            has_target = flags & FLAG_TARGET != 0;
            (flags & FLAG_DEAD != 0, Some(flags & FLAG_REPEATS != 0))
        }
        (VERSION_2, flags) if flags & !(FLAG_DEAD | FLAG_REPEATS) == 0 => {
            (flags & FLAG_DEAD != 0, Some(flags & FLAG_REPEATS != 0))
        }
        (VERSION | VERSION_2, flags) => return Err(format!("unknown flags {flags:#04x}")),
        (VERSION_1, state @ (0 | 1)) => (state == 1, None),
        (VERSION_1, state) => return Err(format!("unknown state {state}")),
        (version, _) => return Err(format!("unknown record version {version}")),
    };
    let state = if dead { TaskState::Dead } else { TaskState::Scheduled };
    let run_at_ms = reader.u64()?;
    let created_ms = reader.u64()?;
    let (attempt, max_attempts) = match repeats {
        Some(_) => (u32::from(reader.u16()?), u32::from(reader.u16()?)),
        None => (reader.u32()?, reader.u32()?),
    };
    let every_ms = match repeats {
        Some(false) => None,
        Some(true) => Some(Some(reader.u64()?).filter(|&every| every != 0).ok_or("a repeat period of 0")?),
        None => Some(reader.u64()?).filter(|&every| every != 0),
    };
    let expires_at_ms = if expires { Some(reader.u64()?) } else { None };
    let priority = if has_priority { reader.u32()? } else { PRIORITY_DEFAULT };
    let lease_ms = if has_lease { Some(reader.u32()?) } else { None };
    let http = if has_target { Some(Arc::new(target_record::decode(&mut reader)?)) } else { None };
    let queue_len = reader.u16()? as usize;
    let queue: Arc<str> = reader.str(queue_len)?.into();
    let key = match reader.u16()? {
        NO_KEY => None,
        len => Some(reader.str(len as usize)?.into()),
    };
    let payload_len = reader.u32()? as usize;
    let payload =
        if payload_apart { PayloadIn::Apart(payload_len) } else { PayloadIn::Body(reader.take(payload_len)?) };
    reader.end()?;
    let task = Task {
        id,
        queue,
        run_at_ms,
        attempt,
        max_attempts,
        priority,
        lease_ms,
        key,
        every_ms,
        expires_at_ms,
        dead_reason: DeadReason::Attempts,
        last_error: None,
        http,
        state,
        created_ms,
    };
    Ok((task, payload))
}

/// What changes in a task's life: its due time, attempts, whether it is
/// dead, and its last error. [`STATE_BYTES`] long, plus the error's length
/// and bytes if it has one.
pub(crate) fn encode_state(task: &Task) -> Vec<u8> {
    let error = task.last_error.as_deref();
    let mut out = Vec::with_capacity(STATE_BYTES + 4 + error.map_or(0, |error| 2 + error.len()));
    out.push(STATE_VERSION);
    out.push(state_flags(task));
    out.extend_from_slice(&task.run_at_ms.to_le_bytes());
    out.extend_from_slice(&attempts(task.attempt));
    if task.priority != PRIORITY_DEFAULT {
        out.extend_from_slice(&task.priority.to_le_bytes());
    }
    if let Some(error) = error {
        // Bounded by NACK_REASON_BYTES_MAX (asserted above to fit).
        out.extend_from_slice(&(error.len() as u16).to_le_bytes());
        out.extend_from_slice(error.as_bytes());
    }
    seal(&mut out);
    out
}

/// Applies a state record to the task its body describes.
pub(crate) fn apply_state(task: &mut Task, bytes: &[u8]) -> Result<(), String> {
    let bytes = match bytes.first() {
        Some(&STATE_VERSION) => unseal(bytes)?,
        Some(&STATE_VERSION_1) => bytes,
        Some(version) => return Err(format!("unknown state record version {version}")),
        None => return Err("an empty state record".into()),
    };
    let mut reader = Reader { bytes, at: 0 };
    reader.u8()?;
    let flags = reader.u8()?;
    (task.state, task.dead_reason) = match flags & !(FLAG_NO_EXPIRY | FLAG_ERROR | FLAG_PRIORITY) {
        0 => (TaskState::Scheduled, DeadReason::Attempts),
        FLAG_DEAD => (TaskState::Dead, DeadReason::Attempts),
        both if both == FLAG_DEAD | FLAG_EXPIRED => (TaskState::Dead, DeadReason::Expired),
        both if both == FLAG_DEAD | FLAG_CORRUPT => (TaskState::Dead, DeadReason::Corrupt),
        _ => return Err(format!("unknown state flags {flags:#04x}")),
    };
    if flags & FLAG_NO_EXPIRY != 0 {
        task.expires_at_ms = None;
    }
    task.run_at_ms = reader.u64()?;
    task.attempt = u32::from(reader.u16()?);
    task.priority = if flags & FLAG_PRIORITY != 0 { reader.u32()? } else { PRIORITY_DEFAULT };
    task.last_error = if flags & FLAG_ERROR != 0 {
        let len = reader.u16()? as usize;
        Some(reader.str(len)?.into())
    } else {
        None
    };
    reader.end()
}

#[cfg(test)]
mod tests;
