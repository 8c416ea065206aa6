//! Integration tests, compiled into one binary.

#[cfg(feature = "cron")]
mod calendar;
#[cfg(feature = "tokio")]
mod delay_queue;
#[cfg(feature = "tokio")]
mod delay_queue_model;
mod realtime;
mod scheduler;
mod timer_thread;
mod wheel_model;
