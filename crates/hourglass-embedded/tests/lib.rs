//! Integration tests of the embedded backend, compiled into one binary.
mod budgets;
mod conformance;
mod deadline;
mod durability;
mod engine;
mod kill;
mod listing;
mod schedules;
mod sim;
