//! The on-disk encoding of a task: one record per task, keyed by id. The
//! payload is stored apart, under the same id, so that the changes of a task's
//! life (a claim, a nack, a lease expiry) rewrite these few dozen bytes and
//! never the payload.
//!
//! ```text
//! offset size  field
//!      0    1  format version (2)
//!      1    1  flags: bit 0 dead (else scheduled: a lease is not kept across
//!              restarts), bit 1 repeats (every_ms follows); no other bit is set
//!      2    8  run_at_ms        u64 LE
//!     10    8  created_ms       u64 LE
//!     18    2  attempt          u16 LE (attempts are at most MAX_ATTEMPTS_MAX)
//!     20    2  max_attempts     u16 LE
//!     22   (8) every_ms         u64 LE, not 0; only if the task repeats
//!           2  queue length q   u16 LE, then q bytes of UTF-8
//!           2  key length k     u16 LE, 0xFFFF = no key, then k bytes of UTF-8
//! ```
//!
//! Version 1 records, written before payloads had a table of their own, have
//! a state byte (0 scheduled, 1 dead) in place of the flags, `u32` attempts, an
//! `every_ms` that is always there (0 = does not repeat), and end with the
//! payload (`u32 LE` length, then the bytes). They are still read.
//!
//! Integrity of the bytes is the database's job (redb checksums its pages and
//! commits atomically); this layer checks every length and every string, and a
//! record that does not decode exactly is reported as corrupt, never guessed at.

use std::sync::Arc;

#[cfg(test)]
use crate::model::Lease;
use crate::model::{Task, TaskState};

const VERSION: u8 = 2;
/// Records that carry their payload at the end.
const VERSION_WITH_PAYLOAD: u8 = 1;
const NO_KEY: u16 = u16::MAX;
const FIXED_BYTES: usize = 22;
const FLAG_DEAD: u8 = 1;
const FLAG_REPEATS: u8 = 2;
const _: () = assert!(crate::limits::MAX_ATTEMPTS_MAX <= u16::MAX as u32, "attempts fit in a u16");

pub(crate) fn encode(task: &Task) -> Vec<u8> {
    let key = task.key.as_deref();
    let mut out = Vec::with_capacity(FIXED_BYTES + 8 + 4 + task.queue.len() + key.map_or(0, str::len));
    out.push(VERSION);
    let dead = if task.state == TaskState::Dead { FLAG_DEAD } else { 0 };
    let repeats = if task.every_ms.is_some() { FLAG_REPEATS } else { 0 };
    out.push(dead | repeats);
    out.extend_from_slice(&task.run_at_ms.to_le_bytes());
    out.extend_from_slice(&task.created_ms.to_le_bytes());
    // Bounded by MAX_ATTEMPTS_MAX (asserted above), so these never saturate.
    out.extend_from_slice(&u16::try_from(task.attempt).unwrap_or(u16::MAX).to_le_bytes());
    out.extend_from_slice(&u16::try_from(task.max_attempts).unwrap_or(u16::MAX).to_le_bytes());
    if let Some(every_ms) = task.every_ms {
        out.extend_from_slice(&every_ms.to_le_bytes());
    }
    // Lengths are bounded by the engine's limits, far below these fields' ranges.
    out.extend_from_slice(&(task.queue.len() as u16).to_le_bytes());
    out.extend_from_slice(task.queue.as_bytes());
    match key {
        None => out.extend_from_slice(&NO_KEY.to_le_bytes()),
        Some(key) => {
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
        }
    }
    out
}

/// A task, and its payload if the record is of the version that held it.
pub(crate) fn decode(id: u64, bytes: &[u8]) -> Result<(Task, Option<Box<str>>), String> {
    let mut reader = Reader { bytes, at: 0 };
    let version = reader.u8()?;
    let (dead, repeats) = match (version, reader.u8()?) {
        (VERSION, flags) if flags & !(FLAG_DEAD | FLAG_REPEATS) == 0 => {
            (flags & FLAG_DEAD != 0, Some(flags & FLAG_REPEATS != 0))
        }
        (VERSION, flags) => return Err(format!("unknown flags {flags:#04x}")),
        (VERSION_WITH_PAYLOAD, state @ (0 | 1)) => (state == 1, None),
        (VERSION_WITH_PAYLOAD, state) => return Err(format!("unknown state {state}")),
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
        Some(true) => Some(reader.u64()?).filter(|&every| every != 0).ok_or("a repeat period of 0")?.into(),
        None => Some(reader.u64()?).filter(|&every| every != 0),
    };
    let queue_len = reader.u16()? as usize;
    let queue: Arc<str> = reader.str(queue_len)?.into();
    let key = match reader.u16()? {
        NO_KEY => None,
        len => Some(reader.str(len as usize)?.into()),
    };
    let payload = if version == VERSION_WITH_PAYLOAD {
        let payload_len = reader.u32()? as usize;
        Some(reader.str(payload_len)?.into())
    } else {
        None
    };
    if reader.at != bytes.len() {
        return Err(format!("{} trailing bytes", bytes.len() - reader.at));
    }
    Ok((Task { id, queue, run_at_ms, attempt, max_attempts, key, every_ms, state, created_ms }, payload))
}

/// A stored payload: text, checked to be UTF-8.
pub(crate) fn decode_payload(id: u64, bytes: &[u8]) -> Result<Box<str>, String> {
    std::str::from_utf8(bytes).map(Box::from).map_err(|error| format!("payload of task {id}: invalid UTF-8: {error}"))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(len).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated: needs {len} bytes at offset {}", self.at))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn str(&mut self, len: usize) -> Result<&'a str, String> {
        std::str::from_utf8(self.take(len)?).map_err(|error| format!("invalid UTF-8: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            id: 7,
            queue: "emails".into(),
            run_at_ms: 1_700_000_000_000,
            attempt: 2,
            max_attempts: 5,
            key: Some("order-42".into()),
            every_ms: Some(60_000),
            state: TaskState::Scheduled,
            created_ms: 1_699_999_999_000,
        }
    }

    #[test]
    fn round_trips() {
        let task = task();
        assert_eq!(decode(7, &encode(&task)).unwrap(), (task.clone(), None));
        let plain = Task { key: None, every_ms: None, state: TaskState::Dead, ..task };
        assert_eq!(decode(7, &encode(&plain)).unwrap(), (plain, None));
    }

    /// A record as version 1 wrote it.
    fn encode_v1(task: &Task, payload: &str) -> Vec<u8> {
        let mut out = vec![VERSION_WITH_PAYLOAD, u8::from(task.state == TaskState::Dead)];
        out.extend_from_slice(&task.run_at_ms.to_le_bytes());
        out.extend_from_slice(&task.created_ms.to_le_bytes());
        out.extend_from_slice(&task.attempt.to_le_bytes());
        out.extend_from_slice(&task.max_attempts.to_le_bytes());
        out.extend_from_slice(&task.every_ms.unwrap_or(0).to_le_bytes());
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
        out.extend_from_slice(payload.as_bytes());
        out
    }

    #[test]
    fn version_1_records_with_their_payload_are_still_read() {
        let payload = r#"{"to":"a@b.c"}"#;
        for task in [task(), Task { key: None, every_ms: None, state: TaskState::Dead, ..task() }] {
            let mut bytes = encode_v1(&task, payload);
            assert_eq!(decode(7, &bytes).unwrap(), (task, Some(payload.into())));
            bytes.pop();
            assert!(decode(7, &bytes).is_err(), "a cut payload is refused");
        }
    }

    #[test]
    fn a_task_that_does_not_repeat_takes_22_bytes_and_its_names() {
        let plain = Task { key: None, every_ms: None, ..task() };
        assert_eq!(encode(&plain).len(), FIXED_BYTES + 2 + "emails".len() + 2);
        assert_eq!(encode(&task()).len(), FIXED_BYTES + 8 + 2 + "emails".len() + 2 + "order-42".len());
    }

    #[test]
    fn a_lease_is_stored_as_scheduled() {
        let leased = Task { state: TaskState::Leased { lease: Lease(9), until_ms: 5 }, ..task() };
        assert_eq!(decode(7, &encode(&leased)).unwrap().0.state, TaskState::Scheduled);
    }

    proptest::proptest! {
        /// Whatever a damaged disk hands back, decoding answers with a task or
        /// an error, never a panic; and a task that decodes encodes back to the
        /// same bytes, so nothing is silently misread.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Ok((task, None)) = decode(1, &bytes) {
                proptest::prop_assert_eq!(encode(&task), bytes);
            }
        }

        /// Records of real tasks, mutated in one byte, are refused or decode to
        /// a task that re-encodes to the mutated bytes.
        #[test]
        fn one_changed_byte_is_caught_or_faithful(at in 0usize..200, value in proptest::prelude::any::<u8>()) {
            let mut bytes = encode(&task());
            let at = at % bytes.len();
            bytes[at] = value;
            if let Ok((decoded, None)) = decode(7, &bytes) {
                proptest::prop_assert_eq!(encode(&decoded), bytes);
            }
        }
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let bytes = encode(&task());
        for len in 0..bytes.len() {
            assert!(decode(7, &bytes[..len]).is_err(), "accepted a record cut at {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(7, &longer).is_err());
        let mut bad_version = bytes;
        bad_version[0] = 99;
        assert!(decode(7, &bad_version).unwrap_err().contains("version"));
    }
}
