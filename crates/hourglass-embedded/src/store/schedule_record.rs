//! The on-disk encoding of a schedule (table `schedules`, name to record).
//! A schedule is rewritten whole at every occurrence it enqueues: it is small
//! and there are few.
//!
//! ```text
//! offset size  field
//!      0    1  format version (1)
//!      1    1  flags: bits 0-1 the rule (0 cron, 1 every), bits 2-3 misfire
//!              (0 skip, 1 once, 2 all), bit 4 overlap forbidden, bit 5 a
//!              next occurrence follows, bit 6 the last one enqueued follows,
//!              bit 7 paused
//!      2    8  since_ms         u64 LE
//!     10    2  max_attempts     u16 LE
//!     12    8  expires_after_ms u64 LE, 0 = none
//!          (8) every_ms         u64 LE, not 0; only for an every rule
//!          (8) next_ms          u64 LE; only with bit 5
//!         (16) last occurrence  u64 LE, then its task's id u64 LE; only with bit 6
//!           2  queue length q   u16 LE, then q bytes of UTF-8
//!          (4) for a cron rule: expression length u16 LE and its bytes, then
//!              time zone length u16 LE and its bytes
//!           4  payload length p u32 LE, then the p bytes (any bytes;
//!              stores written before payloads were bytes held UTF-8 here)
//!           4  CRC-32 of every byte before it, u32 LE
//! ```
//!
//! The name is the table's key, not in the record.

use super::sealed::{seal, unseal, Reader};
use hourglass_queue::{Misfire, Overlap, Rule, Schedule};

const VERSION: u8 = 1;
const RULE_EVERY: u8 = 1;
const MISFIRE_SHIFT: u8 = 2;
const OVERLAP_FORBID: u8 = 1 << 4;
const HAS_NEXT: u8 = 1 << 5;
const HAS_LAST: u8 = 1 << 6;
const PAUSED: u8 = 1 << 7;

/// The record of `schedule`. Lengths are bounded by the engine's limits, far
/// below these fields' ranges.
pub(crate) fn encode(schedule: &Schedule) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + schedule.queue.len() + schedule.payload.len());
    let misfire = match schedule.misfire {
        Misfire::Skip => 0,
        Misfire::Once => 1,
        Misfire::All => 2,
    };
    let flags = match schedule.rule {
        Rule::Cron { .. } => 0,
        Rule::Every { .. } => RULE_EVERY,
    } | misfire << MISFIRE_SHIFT
        | if schedule.overlap == Overlap::Forbid { OVERLAP_FORBID } else { 0 }
        | if schedule.next_ms.is_some() { HAS_NEXT } else { 0 }
        | if schedule.last.is_some() { HAS_LAST } else { 0 }
        | if schedule.paused { PAUSED } else { 0 };
    out.push(VERSION);
    out.push(flags);
    out.extend_from_slice(&schedule.since_ms.to_le_bytes());
    out.extend_from_slice(&(schedule.max_attempts.min(u32::from(u16::MAX)) as u16).to_le_bytes());
    out.extend_from_slice(&schedule.expires_after_ms.unwrap_or(0).to_le_bytes());
    if let Rule::Every { every_ms } = schedule.rule {
        out.extend_from_slice(&every_ms.to_le_bytes());
    }
    if let Some(next_ms) = schedule.next_ms {
        out.extend_from_slice(&next_ms.to_le_bytes());
    }
    if let Some((occurrence_ms, task)) = schedule.last {
        out.extend_from_slice(&occurrence_ms.to_le_bytes());
        out.extend_from_slice(&task.to_le_bytes());
    }
    let mut text = |bytes: &str| {
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes.as_bytes());
    };
    text(&schedule.queue);
    if let Rule::Cron { expression, time_zone } = &schedule.rule {
        text(expression);
        text(time_zone);
    }
    out.extend_from_slice(&(schedule.payload.len() as u32).to_le_bytes());
    out.extend_from_slice(schedule.payload.as_bytes());
    seal(&mut out);
    out
}

/// The schedule named `name` from its record.
pub(crate) fn decode(name: &str, bytes: &[u8]) -> Result<Schedule, String> {
    let mut reader = Reader { bytes: unseal(bytes)?, at: 0 };
    match reader.u8()? {
        VERSION => {}
        version => return Err(format!("unknown schedule record version {version}")),
    }
    // Every bit of the flags has a meaning; the rule and misfire fields
    // refuse their unused values below.
    let flags = reader.u8()?;
    let misfire = match (flags >> MISFIRE_SHIFT) & 0b11 {
        0 => Misfire::Skip,
        1 => Misfire::Once,
        2 => Misfire::All,
        other => return Err(format!("unknown misfire policy {other}")),
    };
    let overlap = if flags & OVERLAP_FORBID != 0 { Overlap::Forbid } else { Overlap::Allow };
    let since_ms = reader.u64()?;
    let max_attempts = u32::from(reader.u16()?);
    let expires_after_ms = Some(reader.u64()?).filter(|&ms| ms != 0);
    let every_ms = match flags & 0b11 {
        0 => None,
        RULE_EVERY => Some(Some(reader.u64()?).filter(|&every| every != 0).ok_or("a period of 0")?),
        other => return Err(format!("unknown rule kind {other}")),
    };
    let next_ms = if flags & HAS_NEXT != 0 { Some(reader.u64()?) } else { None };
    let last = if flags & HAS_LAST != 0 { Some((reader.u64()?, reader.u64()?)) } else { None };
    let text = |reader: &mut Reader<'_>| -> Result<Box<str>, String> {
        let len = reader.u16()? as usize;
        Ok(reader.str(len)?.into())
    };
    let queue = text(&mut reader)?;
    let rule = match every_ms {
        Some(every_ms) => Rule::Every { every_ms },
        None => Rule::Cron { expression: text(&mut reader)?, time_zone: text(&mut reader)? },
    };
    let payload_len = reader.u32()? as usize;
    let payload = reader.take(payload_len)?.into();
    reader.end()?;
    let paused = flags & PAUSED != 0;
    Ok(Schedule {
        name: name.into(),
        queue,
        rule,
        payload,
        misfire,
        overlap,
        max_attempts,
        expires_after_ms,
        since_ms,
        next_ms,
        last,
        paused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> Schedule {
        Schedule {
            name: "nightly-report".into(),
            queue: "reports".into(),
            rule: Rule::Cron { expression: "0 9 * * MON-FRI".into(), time_zone: "Europe/Berlin".into() },
            payload: r#"{"report":"sales"}"#.into(),
            misfire: Misfire::Once,
            overlap: Overlap::Forbid,
            max_attempts: 3,
            expires_after_ms: Some(3_600_000),
            since_ms: 1_700_000_000_000,
            next_ms: Some(1_700_000_060_000),
            last: Some((1_700_000_000_000, 42)),
            paused: false,
        }
    }

    #[test]
    fn round_trips_every_shape() {
        let cron = schedule();
        let every = Schedule {
            rule: Rule::Every { every_ms: 60_000 },
            misfire: Misfire::All,
            overlap: Overlap::Allow,
            next_ms: None,
            last: None,
            ..schedule()
        };
        let paused = Schedule { paused: true, ..schedule() };
        for schedule in [cron, every, paused, Schedule { misfire: Misfire::Skip, ..schedule() }] {
            let bytes = encode(&schedule);
            assert_eq!(decode(&schedule.name, &bytes), Ok(schedule));
        }
    }

    #[test]
    fn refuses_damaged_records() {
        let bytes = encode(&schedule());
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(decode("s", &damaged).is_err(), "a flipped bit at {at} went unnoticed");
        }
        assert!(decode("s", &bytes[..bytes.len() - 1]).is_err());
        assert!(decode("s", &[]).is_err());
    }
}
