//! Integration tests of the engine, compiled into one binary.
mod engine;
mod sim;
