//! The encoding of one batch of [`Mutation`]s in the relaxed mode's log
//! (`redb_store::relaxed_log`): each change written whole, with the records
//! the store itself writes for it, so that a replay rebuilds exactly the
//! changes that were answered.
//!
//! ```text
//! a batch:     count u32 LE, then count changes
//! a change:    tag u8, then by tag:
//!   1 insert   id u64, body (len u32 + bytes: `record::encode`), and if
//!              the body keeps its payload apart, the payload (len u32 + bytes)
//!   2 update   id u64, body (len u32 + bytes: `record::encode` with no
//!              payload), state (len u32 + bytes: `record::encode_state`)
//!   3 delete   id u64
//!   4 next id  u64
//!   5 schedule name (len u16 + UTF-8), record (len u32 + `schedule_record`)
//!   6 unschedule  name (len u16 + UTF-8)
//!   7 pause    queue (len u16 + UTF-8), paused u8, has-end u8, end u64
//!   8 settings queue (len u16 + UTF-8), record (len u32 + `settings_record`)
//! ```
//!
//! Every record inside carries its own CRC-32, and the log seals each batch
//! with one more: damage is refused, never misread.

use super::record::{self, PayloadIn};
use super::sealed::Reader;
use super::{schedule_record, settings_record, Mutation};

const INSERT: u8 = 1;
const UPDATE: u8 = 2;
const DELETE: u8 = 3;
const NEXT_ID: u8 = 4;
const PUT_SCHEDULE: u8 = 5;
const DELETE_SCHEDULE: u8 = 6;
const PAUSE: u8 = 7;
const SETTINGS: u8 = 8;

/// Appends the encoding of `batch` to `out`.
pub(crate) fn encode(batch: &[Mutation], out: &mut Vec<u8>) {
    out.extend_from_slice(&(batch.len() as u32).to_le_bytes());
    for mutation in batch {
        match mutation {
            Mutation::Insert { task, payload } => {
                out.push(INSERT);
                out.extend_from_slice(&task.id.to_le_bytes());
                put_bytes(out, &record::encode(task, payload));
                if record::apart(payload.len()) {
                    put_bytes(out, payload.as_bytes());
                }
            }
            Mutation::Update(task) => {
                out.push(UPDATE);
                out.extend_from_slice(&task.id.to_le_bytes());
                put_bytes(out, &record::encode(task, b""));
                put_bytes(out, &record::encode_state(task));
            }
            Mutation::Delete(id) => {
                out.push(DELETE);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Mutation::NextId(id) => {
                out.push(NEXT_ID);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Mutation::PutSchedule(schedule) => {
                out.push(PUT_SCHEDULE);
                put_name(out, &schedule.name);
                put_bytes(out, &schedule_record::encode(schedule));
            }
            Mutation::DeleteSchedule(name) => {
                out.push(DELETE_SCHEDULE);
                put_name(out, name);
            }
            Mutation::PauseQueue { queue, paused, until_ms } => {
                out.push(PAUSE);
                put_name(out, queue);
                out.push(u8::from(*paused));
                out.push(u8::from(until_ms.is_some()));
                out.extend_from_slice(&until_ms.unwrap_or(0).to_le_bytes());
            }
            Mutation::PutSettings { queue, settings } => {
                out.push(SETTINGS);
                put_name(out, queue);
                put_bytes(out, &settings_record::encode(settings));
            }
        }
    }
}

/// The batch `bytes` encode.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<Mutation>, String> {
    let mut reader = Reader { bytes, at: 0 };
    let count = reader.u32()? as usize;
    // Each change takes at least nine bytes: no count can ask for more
    // room than the bytes themselves justify.
    let mut batch = Vec::with_capacity(count.min(bytes.len() / 9));
    for _ in 0..count {
        let mutation = match reader.u8()? {
            INSERT => {
                let id = reader.u64()?;
                let body = take_bytes(&mut reader)?;
                let (task, payload) = record::decode(id, body)?;
                let payload = match payload {
                    PayloadIn::Body(payload) => payload.into(),
                    PayloadIn::Apart(len) => {
                        let payload = take_bytes(&mut reader)?;
                        if payload.len() != len {
                            return Err(format!("task {id}: a payload of {} bytes, {len} expected", payload.len()));
                        }
                        payload.into()
                    }
                };
                Mutation::Insert { task, payload }
            }
            UPDATE => {
                let id = reader.u64()?;
                let (mut task, _) = record::decode(id, take_bytes(&mut reader)?)?;
                record::apply_state(&mut task, take_bytes(&mut reader)?)?;
                Mutation::Update(task)
            }
            DELETE => Mutation::Delete(reader.u64()?),
            NEXT_ID => Mutation::NextId(reader.u64()?),
            PUT_SCHEDULE => {
                let name = take_name(&mut reader)?;
                Mutation::PutSchedule(schedule_record::decode(name, take_bytes(&mut reader)?)?)
            }
            DELETE_SCHEDULE => Mutation::DeleteSchedule(take_name(&mut reader)?.into()),
            PAUSE => {
                let queue = take_name(&mut reader)?.into();
                let paused = reader.u8()? != 0;
                let has_end = reader.u8()? != 0;
                let end = reader.u64()?;
                Mutation::PauseQueue { queue, paused, until_ms: has_end.then_some(end) }
            }
            SETTINGS => {
                let queue = take_name(&mut reader)?.into();
                Mutation::PutSettings { queue, settings: settings_record::decode(take_bytes(&mut reader)?)? }
            }
            tag => return Err(format!("unknown change {tag}")),
        };
        batch.push(mutation);
    }
    reader.end()?;
    Ok(batch)
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn take_bytes<'a>(reader: &mut Reader<'a>) -> Result<&'a [u8], String> {
    let len = reader.u32()? as usize;
    reader.take(len)
}

/// A queue's or schedule's name: bounded by the engine's limits, far
/// below a `u16`.
fn put_name(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
}

fn take_name<'a>(reader: &mut Reader<'a>) -> Result<&'a str, String> {
    let len = reader.u16()? as usize;
    reader.str(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_queue::limits::{PAYLOAD_INLINE_MAX, PRIORITY_DEFAULT};
    use hourglass_queue::{DeadReason, Flow, Misfire, Overlap, QueueSettings, Rule, Schedule, Task, TaskState};

    fn task(id: u64) -> Task {
        Task {
            id,
            queue: "orders".into(),
            run_at_ms: 1_800_000_000_000,
            attempt: 0,
            max_attempts: 5,
            priority: PRIORITY_DEFAULT,
            lease_ms: Some(60_000),
            key: Some("k-1".into()),
            every_ms: None,
            expires_at_ms: Some(1_800_000_100_000),
            dead_reason: DeadReason::Attempts,
            last_error: None,
            http: None,
            state: TaskState::Scheduled,
            created_ms: 1_799_999_999_000,
        }
    }

    #[test]
    fn every_change_comes_back_as_it_was() {
        let dead = Task {
            state: TaskState::Dead,
            dead_reason: DeadReason::Expired,
            attempt: 5,
            priority: 3,
            last_error: Some("lease expired".into()),
            ..task(2)
        };
        let schedule = Schedule {
            name: "nightly".into(),
            queue: "reports".into(),
            rule: Rule::Every { every_ms: 60_000 },
            payload: "{}".into(),
            misfire: Misfire::Once,
            overlap: Overlap::Forbid,
            max_attempts: 3,
            expires_after_ms: None,
            since_ms: 1_800_000_000_000,
            next_ms: Some(1_800_000_060_000),
            last: None,
            paused: false,
        };
        let settings = QueueSettings { push: None, flow: Flow { max_in_flight: Some(3), ..Flow::default() } };
        let batch = vec![
            Mutation::Insert { task: task(1), payload: "{\"n\":1}".into() },
            Mutation::Insert { task: task(3), payload: vec![7u8; PAYLOAD_INLINE_MAX + 1].into() },
            Mutation::Update(dead),
            Mutation::Delete(4),
            Mutation::NextId(65_536),
            Mutation::PutSchedule(schedule),
            Mutation::DeleteSchedule("weekly".into()),
            Mutation::PauseQueue { queue: "orders".into(), paused: true, until_ms: Some(1_800_000_500_000) },
            Mutation::PauseQueue { queue: "mail".into(), paused: false, until_ms: None },
            Mutation::PutSettings { queue: "orders".into(), settings },
        ];
        let mut bytes = Vec::new();
        encode(&batch, &mut bytes);
        assert_eq!(decode(&bytes).unwrap(), batch);
    }

    #[test]
    fn damage_is_refused() {
        let mut bytes = Vec::new();
        encode(&[Mutation::Update(task(9)), Mutation::Delete(9)], &mut bytes);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err(), "a trailing byte");
        // The byte before the delete's tag and id: the state record's CRC.
        let flipped = bytes.len() - 10;
        bytes[flipped] ^= 0x40;
        assert!(decode(&bytes).is_err(), "a flipped bit in a state record");
    }
}
