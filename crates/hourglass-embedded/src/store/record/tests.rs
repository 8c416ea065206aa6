//! The record encoding's tests: round trips, older versions, and every
//! damage (a flipped byte, a truncation, random bytes) caught.

use super::*;
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use hourglass_queue::DeadReason;
use hourglass_queue::{HttpMethod, HttpTarget};

const PAYLOAD: &[u8] = br#"{"to":"a@b.c"}"#;

fn task() -> Task {
    Task {
        id: 7,
        queue: "emails".into(),
        run_at_ms: 1_700_000_000_000,
        attempt: 2,
        max_attempts: 5,
        priority: PRIORITY_DEFAULT,
        lease_ms: None,
        key: Some("order-42".into()),
        every_ms: Some(60_000),
        expires_at_ms: None,
        dead_reason: DeadReason::Attempts,
        last_error: None,
        http: None,
        state: TaskState::Scheduled,
        created_ms: 1_699_999_999_000,
    }
}

#[test]
fn a_priority_and_an_own_lease_are_kept_in_the_body_and_a_new_priority_in_the_state() {
    let urgent = Task { priority: 3, lease_ms: Some(120_000), ..task() };
    let body = encode(&urgent, PAYLOAD);
    assert_eq!(body.len(), encode(&task(), PAYLOAD).len() + 8, "4 bytes each, only when set");
    let (mut read, _) = decode(7, &body).unwrap();
    assert_eq!(read, urgent);
    // Released at another priority: the state says so; back at the
    // default, its state says that (the body still says 3).
    let released = Task { priority: 70_000, attempt: 3, ..urgent.clone() };
    apply_state(&mut read, &encode_state(&released)).unwrap();
    assert_eq!(read, released);
    let default = Task { priority: PRIORITY_DEFAULT, ..urgent.clone() };
    let state = encode_state(&default);
    assert_eq!(state.len(), STATE_BYTES, "the default costs nothing");
    apply_state(&mut read, &state).unwrap();
    assert_eq!(read, default);
    for at in 0..body.len() {
        let mut damaged = body.clone();
        damaged[at] ^= 0x10;
        assert!(decode(7, &damaged).is_err(), "a flipped bit at {at} is caught");
    }
}

#[test]
fn an_expiry_is_kept_in_the_body_and_its_end_in_the_state() {
    let expiring = Task { every_ms: None, expires_at_ms: Some(1_700_000_060_000), ..task() };
    let (mut read, _) = decode(7, &encode(&expiring, PAYLOAD)).unwrap();
    assert_eq!(read, expiring);
    let died = Task { state: TaskState::Dead, dead_reason: DeadReason::Expired, ..expiring.clone() };
    apply_state(&mut read, &encode_state(&died)).unwrap();
    assert_eq!(read, died);
    // Dead of a damaged payload: its own reason, never taken for an expiry.
    let corrupt = Task { state: TaskState::Dead, dead_reason: DeadReason::Corrupt, ..expiring.clone() };
    apply_state(&mut read, &encode_state(&corrupt)).unwrap();
    assert_eq!(read, corrupt);
    let mut both = encode_state(&corrupt).to_vec();
    both.truncate(both.len() - CRC_BYTES);
    both[1] |= FLAG_EXPIRED;
    crate::store::sealed::seal(&mut both);
    assert!(apply_state(&mut read, &both).is_err(), "two reasons at once are refused");
    // Retried: the expiry no longer holds, whatever the body says.
    let retried = Task {
        state: TaskState::Scheduled,
        dead_reason: DeadReason::Attempts,
        expires_at_ms: None,
        ..expiring.clone()
    };
    let (mut read, _) = decode(7, &encode(&expiring, PAYLOAD)).unwrap();
    apply_state(&mut read, &encode_state(&retried)).unwrap();
    assert_eq!(read, retried);
}

#[test]
fn round_trips() {
    let task = task();
    assert_eq!(decode(7, &encode(&task, PAYLOAD)).unwrap(), (task.clone(), PayloadIn::Body(PAYLOAD)));
    let plain = Task { key: None, every_ms: None, state: TaskState::Dead, ..task };
    assert_eq!(decode(7, &encode(&plain, "")).unwrap(), (plain, PayloadIn::Body(b"")));
}

#[test]
fn a_payload_is_any_bytes_as_they_are() {
    let bytes: Vec<u8> = (0..=255).rev().step_by(3).collect();
    assert!(!apart(bytes.len()), "in the body");
    assert_eq!(decode(7, &encode(&task(), &bytes)).unwrap(), (task(), PayloadIn::Body(&bytes[..])));
    assert_eq!(decode_payload(&encode_payload(&bytes)).unwrap(), &bytes[..]);
}

fn aimed() -> Task {
    let http = HttpTarget {
        url: "https://example.com/hook?x=é".into(),
        method: HttpMethod::Delete,
        headers: vec![("Authorization".into(), "Bearer t".into()), ("X-Empty".into(), "".into())],
    };
    Task { http: Some(std::sync::Arc::new(http)), lease_ms: Some(9_000), ..task() }
}

#[test]
fn a_target_is_kept_in_the_body_and_counted_in_its_size() {
    let task = aimed();
    let body = encode(&task, PAYLOAD);
    assert_eq!(decode(7, &body).unwrap(), (task.clone(), PayloadIn::Body(PAYLOAD)));
    let sizes = Sizes::of(&task, PAYLOAD.len());
    // The body_bytes estimate leaves out the lease's 4 bytes, like an expiry's.
    assert_eq!(body_bytes(sizes) + 4, body.len());
}

#[test]
fn a_payload_past_the_inline_size_is_kept_apart() {
    let at_most = vec![b'x'; PAYLOAD_INLINE_MAX];
    let over = vec![b'x'; PAYLOAD_INLINE_MAX + 1];
    assert_eq!(decode(7, &encode(&task(), &at_most)).unwrap().1, PayloadIn::Body(&at_most));
    let body = encode(&task(), &over);
    assert_eq!(decode(7, &body).unwrap(), (task(), PayloadIn::Apart(over.len())));
    assert_eq!(body.len(), encode(&task(), "").len(), "a body with its payload apart holds only the length");
    assert!(keeps_payload_apart(&body) && !keeps_payload_apart(&encode(&task(), &at_most)));
}

/// A body as version 1 wrote it.
fn encode_v1(task: &Task, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![VERSION_1, u8::from(task.state == TaskState::Dead)];
    out.extend_from_slice(&task.run_at_ms.to_le_bytes());
    out.extend_from_slice(&task.created_ms.to_le_bytes());
    out.extend_from_slice(&task.attempt.to_le_bytes());
    out.extend_from_slice(&task.max_attempts.to_le_bytes());
    out.extend_from_slice(&task.every_ms.unwrap_or(0).to_le_bytes());
    put_names_and_payload(&mut out, task, payload, true);
    out
}

/// A body as version 2 wrote it: no CRC, the payload always inside.
fn encode_v2(task: &Task, payload: &[u8]) -> Vec<u8> {
    let mut out = encode(task, "");
    out.truncate(out.len() - CRC_BYTES - 4);
    out[0] = VERSION_2;
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

#[test]
fn version_2_bodies_are_still_read_with_payloads_of_any_size() {
    let big = vec![b'y'; PAYLOAD_INLINE_MAX * 4];
    for payload in [PAYLOAD, &big] {
        let bytes = encode_v2(&task(), payload);
        assert_eq!(decode(7, &bytes).unwrap(), (task(), PayloadIn::Body(payload)));
        assert!(decode(7, &bytes[..bytes.len() - 1]).is_err(), "a cut payload is refused");
    }
    let mut apart = encode_v2(&task(), b"");
    apart[1] |= FLAG_APART;
    assert!(decode(7, &apart).is_err(), "version 2 never kept payloads apart");
}

#[test]
fn every_changed_byte_of_a_body_a_state_or_a_payload_is_caught() {
    let payload = "p".repeat(PAYLOAD_INLINE_MAX + 3);
    let records = [
        (encode(&task(), PAYLOAD), "body"),
        (encode(&aimed(), PAYLOAD), "body with a target"),
        (encode(&task(), &payload), "body with its payload apart"),
        (encode_state(&task()).to_vec(), "state"),
        (encode_state(&Task { last_error: Some("timeout".into()), ..task() }), "state"),
        (encode_payload(&payload), "payload"),
    ];
    for (record, what) in records {
        for at in 0..record.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut damaged = record.clone();
                damaged[at] ^= flip;
                let caught = match what {
                    "state" => apply_state(&mut task(), &damaged).is_err(),
                    "payload" => decode_payload(&damaged).is_err(),
                    _ => decode(7, &damaged).is_err(),
                };
                assert!(caught, "{what}: byte {at} xor {flip:#04x} went unnoticed");
            }
        }
    }
    assert_eq!(decode_payload(&encode_payload(&payload)).unwrap(), payload.as_bytes());
}

#[test]
fn version_1_bodies_are_still_read() {
    for task in [task(), Task { key: None, every_ms: None, state: TaskState::Dead, ..task() }] {
        let mut bytes = encode_v1(&task, PAYLOAD);
        assert_eq!(decode(7, &bytes).unwrap(), (task, PayloadIn::Body(PAYLOAD)));
        bytes.pop();
        assert!(decode(7, &bytes).is_err(), "a cut payload is refused");
    }
}

#[test]
fn a_body_is_22_bytes_its_names_payload_and_crc_and_a_state_16() {
    let plain = Task { key: None, every_ms: None, ..task() };
    let names = 2 + "emails".len() + 2;
    assert_eq!(encode(&plain, PAYLOAD).len(), FIXED_BYTES + names + 4 + PAYLOAD.len() + CRC_BYTES);
    assert_eq!(encode(&task(), "").len(), FIXED_BYTES + 8 + names + "order-42".len() + 4 + CRC_BYTES);
    assert_eq!(encode_state(&task()).len(), STATE_BYTES);
    for payload in [&b""[..], PAYLOAD, &[b'z'; PAYLOAD_INLINE_MAX + 9]] {
        for task in [plain.clone(), task()] {
            assert_eq!(body_bytes(Sizes::of(&task, payload.len())), encode(&task, payload).len());
        }
    }
}

#[test]
fn a_state_overrides_what_changes_and_nothing_else() {
    let changed = Task { run_at_ms: 5, attempt: 3, state: TaskState::Dead, ..task() };
    let mut read = task();
    apply_state(&mut read, &encode_state(&changed)).unwrap();
    assert_eq!(read, changed);
    let mut bytes = encode_state(&changed).to_vec();
    for len in 0..STATE_BYTES {
        assert!(apply_state(&mut task(), &bytes[..len]).is_err());
    }
    bytes.push(0);
    assert!(apply_state(&mut task(), &bytes).is_err(), "trailing bytes");
    // Version 1 states, without a CRC, are still read.
    let mut v1 = encode_state(&changed)[..12].to_vec();
    v1[0] = STATE_VERSION_1;
    let mut read = task();
    apply_state(&mut read, &v1).unwrap();
    assert_eq!(read, changed);
    v1[1] = 8;
    assert!(apply_state(&mut task(), &v1).is_err(), "unknown flags");
}

#[test]
fn a_last_error_is_kept_in_the_state_and_goes_with_the_next_state() {
    let failed = Task { attempt: 3, last_error: Some("SMTP 451: try again later ✉".into()), ..task() };
    let bytes = encode_state(&failed);
    assert_eq!(bytes.len(), STATE_BYTES + 2 + "SMTP 451: try again later ✉".len());
    let mut read = task();
    apply_state(&mut read, &bytes).unwrap();
    assert_eq!(read, failed);
    // A later state without one clears it; the longest reason fits.
    apply_state(&mut read, &encode_state(&task())).unwrap();
    assert_eq!(read.last_error, None);
    let longest =
        Task { last_error: Some("e".repeat(hourglass_queue::limits::NACK_REASON_BYTES_MAX).into()), ..task() };
    apply_state(&mut read, &encode_state(&longest)).unwrap();
    assert_eq!(read, longest);
    // A reason that is not UTF-8 is refused (with its CRC made right).
    let mut bad = encode_state(&failed);
    bad.truncate(bad.len() - CRC_BYTES);
    let at = bad.len() - 1;
    bad[at] = 0xff;
    seal(&mut bad);
    assert!(apply_state(&mut task(), &bad).is_err());
}

#[test]
fn a_lease_is_stored_as_scheduled() {
    let leased = Task { state: TaskState::Leased { lease: Lease(9), until_ms: 5 }, ..task() };
    assert_eq!(decode(7, &encode(&leased, PAYLOAD)).unwrap().0.state, TaskState::Scheduled);
    let mut read = Task { state: TaskState::Dead, ..task() };
    apply_state(&mut read, &encode_state(&leased)).unwrap();
    assert_eq!(read.state, TaskState::Scheduled);
}

/// The payload to encode a decoded body back with, if this version
/// writes the body as it was read: a version 2 body, with a payload where
/// this version puts it.
fn canonical(version: u8, payload: PayloadIn<'_>) -> Option<Vec<u8>> {
    match payload {
        _ if version != VERSION => None,
        PayloadIn::Body(payload) => (!apart(payload.len())).then(|| payload.to_owned()),
        PayloadIn::Apart(len) => (apart(len) && len <= 1 << 20).then(|| vec![b'x'; len]),
    }
}

proptest::proptest! {
    /// Whatever a damaged disk hands back, decoding answers with a task or
    /// an error, never a panic; and a version 2 body that decodes encodes
    /// back to the same bytes, so nothing is silently misread.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        if let Ok((task, payload)) = decode(1, &bytes) {
            if let Some(payload) = canonical(bytes[0], payload) {
                proptest::prop_assert_eq!(encode(&task, &payload), bytes.clone());
            }
        }
        let mut target = task();
        if apply_state(&mut target, &bytes).is_ok() {
            proptest::prop_assert_eq!(encode_state(&target).to_vec(), bytes);
        }
    }

    /// Bodies of real tasks, mutated in one byte, are refused or decode to
    /// a task that re-encodes to the mutated bytes.
    #[test]
    fn one_changed_byte_is_caught_or_faithful(at in 0usize..200, value in proptest::prelude::any::<u8>()) {
        let mut bytes = encode(&task(), PAYLOAD);
        let at = at % bytes.len();
        bytes[at] = value;
        if let Ok((decoded, payload)) = decode(7, &bytes) {
            if let Some(payload) = canonical(bytes[0], payload) {
                proptest::prop_assert_eq!(encode(&decoded, &payload), bytes);
            }
        }
    }
}

#[test]
fn every_truncation_and_extension_is_refused() {
    let bytes = encode(&task(), PAYLOAD);
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
