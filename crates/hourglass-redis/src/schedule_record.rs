//! A schedule's record as `lua/schedule.lua` keeps it (MessagePack, short
//! field names, described at the top of the script), written from and read
//! into the contract's [`Schedule`]. The payload is kept beside it, in a
//! hash of its own, so that the record stays small and the scripts copy the
//! payload's bytes without reading them.

use rmpv::Value;

use hourglass_queue::{Failure, Misfire, Overlap, QueueError, Rule, Schedule};

use crate::keys;

/// A schedule as stored, and the revision a change of it must find.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) schedule: Schedule,
    pub(crate) rev: u64,
}

fn corrupt(what: &str) -> QueueError {
    QueueError::Storage(Failure::msg(format!("a schedule record in Redis is malformed: {what}")))
}

fn misfire_name(misfire: Misfire) -> &'static str {
    match misfire {
        Misfire::Skip => "skip",
        Misfire::Once => "once",
        Misfire::All => "all",
    }
}

fn overlap_name(overlap: Overlap) -> &'static str {
    match overlap {
        Overlap::Allow => "allow",
        Overlap::Forbid => "forbid",
    }
}

/// `schedule` as the put script stores it (it adds the revision). Its last
/// task is kept as the sequence number in its shard: the schedule's, where
/// every task of its occurrences is.
pub(crate) fn encode(schedule: &Schedule) -> Vec<u8> {
    let text = |name: &str, value: &str| (Value::from(name), Value::from(value));
    let number = |name: &str, value: u64| (Value::from(name), Value::from(value));
    let mut fields = vec![
        text("q", &schedule.queue),
        text("f", misfire_name(schedule.misfire)),
        text("o", overlap_name(schedule.overlap)),
        number("m", u64::from(schedule.max_attempts)),
        number("S", schedule.since_ms),
    ];
    match &schedule.rule {
        Rule::Cron { expression, time_zone } => fields.extend([text("c", expression), text("z", time_zone)]),
        Rule::Every { every_ms } => fields.push(number("e", *every_ms)),
    }
    fields.extend(schedule.expires_after_ms.map(|ms| number("x", ms)));
    fields.extend(schedule.next_ms.map(|ms| number("n", ms)));
    if let Some((occurrence_ms, id)) = schedule.last {
        fields.push(number("lo", occurrence_ms));
        fields.push(number("li", id >> keys::SHARD_BITS));
    }
    if schedule.paused {
        fields.push(number("P", 1));
    }
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &Value::Map(fields)).expect("writing to a Vec does not fail");
    bytes
}

/// The record of schedule `name` in `shard`, with its payload.
pub(crate) fn decode(shard: u16, name: &str, raw: &[u8], payload: Vec<u8>) -> Result<Stored, QueueError> {
    let value = rmpv::decode::read_value(&mut &raw[..])
        .map_err(|e| QueueError::Storage(Failure::new("a schedule record in Redis is malformed", e)))?;
    let Value::Map(fields) = value else { return Err(corrupt("not a map")) };
    let get = |field: &str| fields.iter().find(|(k, _)| k.as_str() == Some(field)).map(|(_, v)| v);
    let number = |field: &str| get(field).and_then(crate::record::number);
    let text = |field: &str| get(field).and_then(|v| v.as_str());
    let need = |field: &str| number(field).ok_or_else(|| corrupt(field));
    let rule = match (text("c"), text("z"), number("e")) {
        (Some(expression), Some(time_zone), None) => {
            Rule::Cron { expression: expression.into(), time_zone: time_zone.into() }
        }
        (None, None, Some(every_ms)) => Rule::Every { every_ms },
        _ => return Err(corrupt("neither a cron rule nor a period")),
    };
    let misfire = match text("f") {
        Some("skip") => Misfire::Skip,
        Some("once") => Misfire::Once,
        Some("all") => Misfire::All,
        _ => return Err(corrupt("f")),
    };
    let overlap = match text("o") {
        Some("allow") => Overlap::Allow,
        Some("forbid") => Overlap::Forbid,
        _ => return Err(corrupt("o")),
    };
    let last = match (number("lo"), number("li")) {
        (Some(occurrence_ms), Some(seq)) => Some((occurrence_ms, keys::id(shard, seq))),
        (None, None) => None,
        _ => return Err(corrupt("lo and li")),
    };
    let schedule = Schedule {
        name: name.into(),
        queue: text("q").ok_or_else(|| corrupt("q"))?.into(),
        rule,
        payload: payload.into(),
        misfire,
        overlap,
        max_attempts: u32::try_from(need("m")?).map_err(|_| corrupt("m"))?,
        expires_after_ms: number("x"),
        since_ms: need("S")?,
        next_ms: number("n"),
        last,
        paused: number("P") == Some(1),
    };
    Ok(Stored { schedule, rev: need("v")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rule: Rule) -> Schedule {
        Schedule {
            name: "report".into(),
            queue: "reports".into(),
            rule,
            payload: vec![0, 159, 146, 150].into(),
            misfire: Misfire::Once,
            overlap: Overlap::Forbid,
            max_attempts: 7,
            expires_after_ms: Some(60_000),
            since_ms: 1_764_547_200_123,
            next_ms: Some(1_764_547_260_000),
            last: Some((1_764_547_200_000, keys::id(5, 42))),
            paused: true,
        }
    }

    /// What the put script adds: the revision.
    fn with_rev(bytes: &[u8], rev: u64) -> Vec<u8> {
        let Value::Map(mut fields) = rmpv::decode::read_value(&mut &bytes[..]).unwrap() else { panic!("a map") };
        fields.push((Value::from("v"), Value::from(rev)));
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, &Value::Map(fields)).unwrap();
        out
    }

    #[test]
    fn a_schedule_reads_back_as_it_was_written() {
        let cron = Rule::Cron { expression: "0 9 * * MON-FRI".into(), time_zone: "Europe/Berlin".into() };
        for schedule in [
            sample(cron),
            Schedule {
                next_ms: None,
                last: None,
                paused: false,
                expires_after_ms: None,
                ..sample(Rule::Every { every_ms: 250 })
            },
        ] {
            let raw = with_rev(&encode(&schedule), 9);
            let stored = decode(5, "report", &raw, schedule.payload.as_bytes().to_vec()).unwrap();
            assert_eq!((stored.schedule, stored.rev), (schedule, 9));
        }
    }

    #[test]
    fn a_malformed_record_is_a_storage_error_naming_the_field() {
        let raw = encode(&sample(Rule::Every { every_ms: 250 }));
        let error = decode(5, "report", &raw, Vec::new()).unwrap_err();
        assert!(error.to_string().contains('v'), "{error}");
        assert!(decode(5, "report", b"\xc1", Vec::new()).is_err());
    }
}
