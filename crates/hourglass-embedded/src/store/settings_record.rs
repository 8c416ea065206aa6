//! The on-disk encoding of a queue's settings (table `queue_settings`, the
//! queue's name to this record; a queue with the default settings has none):
//!
//! ```text
//! offset size  field
//!      0    1  format version (1)
//!      1    1  flags: bit 0 a push target follows, bit 1 a rate, bit 2 a
//!              burst, bit 3 a cap on tasks in flight; no other bit is set
//!          (4) push timeout_ms  u32 LE, then the target (`target_record`);
//!              only with bit 0
//!          (8) rate_per_s       f64 LE; only with bit 1
//!          (4) burst            u32 LE; only with bit 2
//!          (4) max_in_flight    u32 LE; only with bit 3
//!           4  CRC-32 of every byte before it, u32 LE
//! ```

use std::sync::Arc;

use super::sealed::{seal, unseal, Reader};
use super::target_record;
use hourglass_queue::{Flow, PushTarget, QueueSettings};

const VERSION: u8 = 1;
const HAS_PUSH: u8 = 1;
const HAS_RATE: u8 = 2;
const HAS_BURST: u8 = 4;
const HAS_CAP: u8 = 8;

/// The record of `settings`.
pub(crate) fn encode(settings: &QueueSettings) -> Vec<u8> {
    let flow = &settings.flow;
    let mut out = Vec::with_capacity(32 + settings.push.as_ref().map_or(0, |p| target_record::encoded_bytes(&p.http)));
    out.push(VERSION);
    out.push(
        if settings.push.is_some() { HAS_PUSH } else { 0 }
            | if flow.rate_per_s.is_some() { HAS_RATE } else { 0 }
            | if flow.burst.is_some() { HAS_BURST } else { 0 }
            | if flow.max_in_flight.is_some() { HAS_CAP } else { 0 },
    );
    if let Some(push) = &settings.push {
        out.extend_from_slice(&push.timeout_ms.to_le_bytes());
        target_record::encode(&mut out, &push.http);
    }
    if let Some(rate) = flow.rate_per_s {
        out.extend_from_slice(&rate.to_le_bytes());
    }
    if let Some(burst) = flow.burst {
        out.extend_from_slice(&burst.to_le_bytes());
    }
    if let Some(max) = flow.max_in_flight {
        out.extend_from_slice(&max.to_le_bytes());
    }
    seal(&mut out);
    out
}

/// Settings from their record, checked against its CRC.
pub(crate) fn decode(bytes: &[u8]) -> Result<QueueSettings, String> {
    let mut reader = Reader { bytes: unseal(bytes)?, at: 0 };
    match reader.u8()? {
        VERSION => {}
        version => return Err(format!("unknown settings record version {version}")),
    }
    let flags = reader.u8()?;
    if flags & !(HAS_PUSH | HAS_RATE | HAS_BURST | HAS_CAP) != 0 {
        return Err(format!("unknown flags {flags:#04x}"));
    }
    let push = if flags & HAS_PUSH != 0 {
        let timeout_ms = reader.u32()?;
        Some(Arc::new(PushTarget { http: target_record::decode(&mut reader)?, timeout_ms }))
    } else {
        None
    };
    let rate_per_s = if flags & HAS_RATE != 0 { Some(f64::from_le_bytes(reader.array()?)) } else { None };
    if rate_per_s.is_some_and(|rate| !(rate.is_finite() && rate > 0.0)) {
        return Err(format!("a rate of {rate_per_s:?}"));
    }
    let burst = if flags & HAS_BURST != 0 { Some(reader.u32()?) } else { None };
    let max_in_flight = if flags & HAS_CAP != 0 { Some(reader.u32()?) } else { None };
    reader.end()?;
    Ok(QueueSettings { push, flow: Flow { rate_per_s, burst, max_in_flight } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_queue::{HttpMethod, HttpTarget};

    fn settings() -> QueueSettings {
        let http = HttpTarget {
            url: "https://example.com/hook".into(),
            method: HttpMethod::Patch,
            headers: vec![("Authorization".into(), "Bearer é".into())],
        };
        QueueSettings {
            push: Some(Arc::new(PushTarget { http, timeout_ms: 1_500 })),
            flow: Flow { rate_per_s: Some(0.25), burst: Some(4), max_in_flight: Some(9) },
        }
    }

    #[test]
    fn round_trips_and_refuses_damage() {
        for settings in [settings(), QueueSettings::default(), QueueSettings { push: None, ..settings() }] {
            assert_eq!(decode(&encode(&settings)), Ok(settings));
        }
        let bytes = encode(&settings());
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            assert!(decode(&damaged).is_err(), "a flip at {at} is caught");
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
        }
    }
}
