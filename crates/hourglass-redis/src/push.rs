//! Push delivery's data in Redis: a task's own target in its record (field
//! `h`, MessagePack that Rust packs and the enqueue script embeds), and each
//! queue's settings in one hash outside the shards (`settings`, the queue's
//! name to MessagePack), with a copy of whether the queue pushes in every
//! shard (flag `P` of the queue's keys), which the scripts that file a due
//! task read to pick its set (`r` for pull claims, `R` for push claims).

use std::collections::HashMap;
use std::sync::Arc;

use redis::AsyncCommands;
use rmpv::Value;

use hourglass_queue::limits::{PUSH_LEASE_MARGIN_MS, PUSH_TIMEOUT_MS_DEFAULT};
use hourglass_queue::{validate, Failure, Flow, HttpMethod, HttpTarget, PushTarget, QueueError, QueueSettings};

use crate::error::storage;
use crate::options::SETTINGS_FRESH_FOR;
use crate::scripts::SCRIPTS;
use crate::RedisBackend;

/// What a malformed target or settings record says.
fn corrupt(what: &str) -> QueueError {
    QueueError::Storage(Failure::msg(format!("push data in Redis is malformed: {what}")))
}

fn text(value: &str) -> Value {
    Value::String(value.into())
}

/// A target as a MessagePack map: `u` url, `m` method code, `H` headers as
/// pairs.
pub(crate) fn target_value(target: &HttpTarget) -> Value {
    let headers = target.headers.iter().map(|(name, value)| Value::Array(vec![text(name), text(value)])).collect();
    Value::Map(vec![
        (text("u"), text(&target.url)),
        (text("m"), Value::from(target.method.code())),
        (text("H"), Value::Array(headers)),
    ])
}

/// A target packed for the enqueue script.
pub(crate) fn pack_target(target: &HttpTarget) -> Vec<u8> {
    pack(&target_value(target))
}

fn pack(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value).expect("writing to a Vec does not fail");
    out
}

fn field<'a>(map: &'a [(Value, Value)], name: &str) -> Option<&'a Value> {
    map.iter().find(|(key, _)| key.as_str() == Some(name)).map(|(_, value)| value)
}

/// A target from its map, as [`target_value`] wrote it (cmsgpack may write
/// an empty list of headers as a map).
pub(crate) fn target_of(value: &Value) -> Result<HttpTarget, QueueError> {
    let Value::Map(map) = value else { return Err(corrupt("a target is not a map")) };
    let url = field(map, "u").and_then(Value::as_str).ok_or_else(|| corrupt("a target's url"))?;
    let code = field(map, "m").and_then(Value::as_u64).ok_or_else(|| corrupt("a target's method"))?;
    let method = u8::try_from(code).ok().and_then(HttpMethod::from_code).ok_or_else(|| corrupt("a target's method"))?;
    let headers = match field(map, "H") {
        Some(Value::Array(pairs)) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([name, value]) => match (name.as_str(), value.as_str()) {
                    (Some(name), Some(value)) => Ok((name.into(), value.into())),
                    _ => Err(corrupt("a header")),
                },
                _ => Err(corrupt("a header")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Map(empty)) if empty.is_empty() => Vec::new(),
        None => Vec::new(),
        Some(_) => return Err(corrupt("a target's headers")),
    };
    Ok(HttpTarget { url: url.into(), method, headers })
}

/// Settings as stored: the push target's map with `t` its timeout, and `r`
/// rate, `b` burst, `c` cap, each only if set.
fn pack_settings(settings: &QueueSettings) -> Vec<u8> {
    let mut map = Vec::new();
    if let Some(push) = &settings.push {
        map.push((text("push"), target_value(&push.http)));
        map.push((text("t"), Value::from(push.timeout_ms)));
    }
    let flow = &settings.flow;
    if let Some(rate) = flow.rate_per_s {
        map.push((text("r"), Value::F64(rate)));
    }
    if let Some(burst) = flow.burst {
        map.push((text("b"), Value::from(burst)));
    }
    if let Some(cap) = flow.max_in_flight {
        map.push((text("c"), Value::from(cap)));
    }
    pack(&Value::Map(map))
}

fn unpack_settings(raw: &[u8]) -> Result<QueueSettings, QueueError> {
    let value =
        rmpv::decode::read_value(&mut &raw[..]).map_err(|e| QueueError::Storage(Failure::new("settings", e)))?;
    let Value::Map(map) = value else { return Err(corrupt("settings are not a map")) };
    let small = |name: &str| {
        field(&map, name)
            .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| corrupt(name)))
            .transpose()
    };
    let push = match field(&map, "push") {
        Some(target) => {
            let timeout_ms = small("t")?.ok_or_else(|| corrupt("a push target's timeout"))?;
            Some(Arc::new(PushTarget { http: target_of(target)?, timeout_ms }))
        }
        None => None,
    };
    let rate_per_s = field(&map, "r").map(|v| v.as_f64().ok_or_else(|| corrupt("r"))).transpose()?;
    Ok(QueueSettings { push, flow: Flow { rate_per_s, burst: small("b")?, max_in_flight: small("c")? } })
}

/// The lease of a push task of a queue with `settings` (a task with a target
/// of its own, in a queue without one, gets the default timeout's): its
/// target's timeout and a margin.
pub(crate) fn push_lease_ms(settings: &QueueSettings) -> u64 {
    let timeout_ms = settings.push.as_ref().map_or(PUSH_TIMEOUT_MS_DEFAULT, |push| push.timeout_ms);
    u64::from(timeout_ms) + PUSH_LEASE_MARGIN_MS
}

impl RedisBackend {
    /// `queue`'s settings as stored: the defaults if none are.
    pub(crate) async fn stored_settings(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        validate::queue_name(queue)?;
        let raw: Option<Vec<u8>> = self.conn().hget(self.keys.global("settings"), queue).await.map_err(storage)?;
        raw.map_or_else(|| Ok(QueueSettings::default()), |raw| unpack_settings(&raw))
    }

    /// `queue`'s settings as this node last read them, if within
    /// [`SETTINGS_FRESH_FOR`], else as stored now. One read of a queue's at
    /// a time: the claims of a queue that find its settings stale together
    /// (their looks again each second fall together) read them once, not
    /// once each; other queues' reads do not wait for it.
    pub(crate) async fn settings_of(&self, queue: &str) -> Result<QueueSettings, QueueError> {
        let fresh = || {
            let settings = self.settings.lock();
            settings.get(queue).filter(|(at, _)| at.elapsed() < SETTINGS_FRESH_FOR).map(|(_, s)| s.clone())
        };
        if let Some(settings) = fresh() {
            return Ok(settings);
        }
        let reading = self.settings_reading.lock().entry(queue.into()).or_default().clone();
        let read = async {
            let _reading = reading.lock().await;
            if let Some(settings) = fresh() {
                return Ok(settings);
            }
            let settings = self.stored_settings(queue).await?;
            self.settings.lock().insert(queue.into(), (std::time::Instant::now(), settings.clone()));
            Ok(settings)
        };
        let settings = read.await;
        drop(reading);
        // The queue's lock is forgotten once no read of it waits.
        self.settings_reading.lock().retain(|_, reading| Arc::strong_count(reading) > 1);
        settings
    }

    /// Every queue's settings that are not the defaults, read in one
    /// request (and remembered, as [`settings_of`](Self::settings_of) does).
    pub(crate) async fn all_settings(&self) -> Result<HashMap<String, QueueSettings>, QueueError> {
        let raw: HashMap<String, Vec<u8>> = self.conn().hgetall(self.keys.global("settings")).await.map_err(storage)?;
        let mut all = HashMap::with_capacity(raw.len());
        for (queue, raw) in raw {
            all.insert(queue, unpack_settings(&raw)?);
        }
        let now = std::time::Instant::now();
        let mut cache = self.settings.lock();
        for (queue, settings) in &all {
            cache.insert(queue.as_str().into(), (now, settings.clone()));
        }
        Ok(all)
    }

    /// Forgets every queue's settings and the queues that push, as read:
    /// a change's hint may have been missed (no subscription stood).
    pub(crate) fn forget_settings(&self) {
        self.settings.lock().clear();
        *self.pushing_read.lock() = None;
    }

    /// Another node put `queue`'s settings: read them again.
    pub(crate) fn settings_changed(&self, queue: &str) {
        self.settings.lock().remove(queue);
        self.watch.wake(queue);
    }

    /// Notes that `queue` may hold tasks for push claims (it has a target, or
    /// one of its tasks has): push claims look at such queues only. The
    /// first to note it tells every node (hint `q QUEUE`), whose push claims
    /// then read the set again.
    pub(crate) async fn may_push(&self, queue: &str) -> Result<(), QueueError> {
        if self.pushing.lock().contains(queue) {
            return Ok(());
        }
        let added: u64 = self.conn().sadd(self.keys.global("pushing"), queue).await.map_err(storage)?;
        self.pushing.lock().insert(queue.into());
        if added > 0 {
            self.pushing_changed();
            let _: () = self.conn().publish(&self.channel, format!("q {queue}")).await.map_err(storage)?;
        }
        Ok(())
    }

    /// A queue may push that did not: push claims read the set again.
    pub(crate) fn pushing_changed(&self) {
        *self.pushing_read.lock() = None;
    }

    /// The queues that may hold tasks for push claims: as this node last
    /// read them if within [`SETTINGS_FRESH_FOR`] (a push claim looks at
    /// them on every wake-up, and the set only grows, each addition hinted),
    /// else as stored now.
    pub(crate) async fn pushing_queues(&self) -> Result<Arc<[String]>, QueueError> {
        if let Some((at, queues)) = &*self.pushing_read.lock() {
            if at.elapsed() < SETTINGS_FRESH_FOR {
                return Ok(queues.clone());
            }
        }
        let mut queues: Vec<String> = self.conn().smembers(self.keys.global("pushing")).await.map_err(storage)?;
        queues.sort();
        let queues: Arc<[String]> = queues.into();
        *self.pushing_read.lock() = Some((std::time::Instant::now(), queues.clone()));
        Ok(queues)
    }

    /// Stores `queue`'s settings, then sets every shard's copy of whether it
    /// pushes (moving its due tasks to the claims that now take them).
    pub(crate) async fn store_settings(
        &self,
        queue: &str,
        settings: QueueSettings,
    ) -> Result<QueueSettings, QueueError> {
        self.closed.check()?;
        validate::queue_name(queue)?;
        validate::settings(&settings)?;
        self.register(queue, None).await?;
        if settings.push.is_some() {
            self.may_push(queue).await?;
        }
        let key = self.keys.global("settings");
        if settings == QueueSettings::default() {
            let _: () = self.conn().hdel(&key, queue).await.map_err(storage)?;
        } else {
            let _: () = self.conn().hset(&key, queue, pack_settings(&settings)).await.map_err(storage)?;
        }
        let pushes = if settings.push.is_some() { "1" } else { "" };
        let moves = (0..self.shards).map(|shard| {
            let mut invocation = SCRIPTS.settings.key(self.keys.shard(shard, "t"));
            for key in self.keys.queue_keys(shard, queue) {
                invocation.key(key);
            }
            invocation.arg(&self.channel).arg(shard).arg(queue).arg(pushes);
            let mut conn = self.conn();
            async move { invocation.invoke_async::<u64>(&mut conn).await }
        });
        for moved in futures_util::future::join_all(moves).await {
            moved.map_err(storage)?;
        }
        self.settings.lock().insert(queue.into(), (std::time::Instant::now(), settings.clone()));
        let _: () = self.conn().publish(&self.channel, format!("s {queue}")).await.map_err(storage)?;
        self.watch.wake(queue);
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_settings_read_back_as_written() {
        let http = HttpTarget {
            url: "https://example.com/h?é".into(),
            method: HttpMethod::Patch,
            headers: vec![("X-A".into(), "1".into()), ("Authorization".into(), "Bearer t".into())],
        };
        assert_eq!(target_of(&target_value(&http)).unwrap(), http);
        let bare = HttpTarget::post("http://e.com/");
        assert_eq!(target_of(&target_value(&bare)).unwrap(), bare);
        let settings = QueueSettings {
            push: Some(Arc::new(PushTarget { http, timeout_ms: 1_500 })),
            flow: Flow { rate_per_s: Some(0.5), burst: Some(3), max_in_flight: Some(7) },
        };
        assert_eq!(unpack_settings(&pack_settings(&settings)).unwrap(), settings);
        assert_eq!(unpack_settings(&pack_settings(&QueueSettings::default())).unwrap(), QueueSettings::default());
        assert!(unpack_settings(b"\x01").is_err());
    }
}
