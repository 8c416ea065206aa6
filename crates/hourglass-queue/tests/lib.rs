//! Integration tests of the engine, compiled into one binary.
mod durability;
mod engine;
mod listing;
mod sim;
