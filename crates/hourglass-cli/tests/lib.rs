//! Integration tests of the `hourglass` binary, compiled into one binary.

mod crash;
mod people;
mod schedules;
