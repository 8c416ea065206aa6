//! Integration tests of the engine, compiled into one binary.
mod budgets;
mod durability;
mod engine;
mod listing;
mod schedules;
mod sim;
