//! Integration tests of the engine, compiled into one binary.
mod budgets;
mod durability;
mod engine;
mod listing;
#[cfg(feature = "redis")]
mod redis;
mod schedules;
mod sim;
