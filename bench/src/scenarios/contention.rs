//! Scenario 8: schedule + cancel pairs from 1, 2 and 4 threads at once, with
//! 100 k timers pending; aggregate operations per second.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hourglass::{Scheduler, Wheel};

use crate::baselines::LazyHeap;
use crate::queues::TimerQueue;
use crate::report::{median, Row};
use crate::Settings;

const BACKGROUND: usize = 100_000;
const AHEAD: Duration = Duration::from_secs(60);

fn run(settings: &Settings, threads: usize, imp: &'static str, pair: impl Fn(u64) + Sync) -> Row {
    let pairs = settings.contention_pairs / threads;
    let ops = (2 * pairs * threads) as f64;
    let samples = (0..settings.reps)
        .map(|_| {
            let start = Instant::now();
            thread::scope(|s| {
                for t in 0..threads {
                    let pair = &pair;
                    s.spawn(move || (0..pairs as u64).for_each(|i| pair(i + t as u64)));
                }
            });
            start.elapsed().as_nanos() as f64 / ops
        })
        .collect();
    let ns = median(samples);
    Row {
        ns_per_op: Some(ns),
        per_sec: Some(1e9 / ns),
        ..Row::new("contention", format!("{threads}_threads"), imp, ops as u64)
    }
}

pub fn hourglass_scheduler(settings: &Settings, threads: usize) -> Row {
    let scheduler = Scheduler::new();
    for _ in 0..BACKGROUND {
        scheduler.schedule(AHEAD, || {}).unwrap();
    }
    run(settings, threads, "hourglass", |i| {
        let id = scheduler.schedule(AHEAD + Duration::from_millis(i % 1000), || {}).unwrap();
        scheduler.cancel(id);
    })
}

pub fn mutex_wheel(settings: &Settings, threads: usize) -> Row {
    let wheel = Arc::new(Mutex::new(Wheel::new()));
    for i in 0..BACKGROUND as u64 {
        wheel.lock().unwrap().insert(60_000 + i % 1000, ()).unwrap();
    }
    run(settings, threads, "hourglass-wheel-in-mutex", |i| {
        let key = wheel.lock().unwrap().insert(60_000 + i % 1000, ()).unwrap();
        wheel.lock().unwrap().remove(key);
    })
}

pub fn parking_lot_wheel(settings: &Settings, threads: usize) -> Row {
    let wheel = Arc::new(parking_lot::Mutex::new(Wheel::new()));
    for i in 0..BACKGROUND as u64 {
        wheel.lock().insert(60_000 + i % 1000, ()).unwrap();
    }
    run(settings, threads, "hourglass-wheel-in-parking_lot", |i| {
        let key = wheel.lock().insert(60_000 + i % 1000, ()).unwrap();
        wheel.lock().remove(key);
    })
}

pub fn mutex_heap(settings: &Settings, threads: usize) -> Row {
    let heap = Mutex::new(LazyHeap::with_capacity(BACKGROUND));
    for i in 0..BACKGROUND as u64 {
        heap.lock().unwrap().insert(60_000 + i % 1000);
    }
    run(settings, threads, "binaryheap-lazy-in-mutex", |i| {
        let key = heap.lock().unwrap().insert(60_000 + i % 1000);
        heap.lock().unwrap().cancel(key);
    })
}
