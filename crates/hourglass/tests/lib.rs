//! Integration tests, compiled into one binary.

mod realtime;
mod scheduler;
mod wheel_model;
