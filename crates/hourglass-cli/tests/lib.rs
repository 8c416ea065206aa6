//! Integration tests of the `hourglass` binary, compiled into one binary.

mod beanstalk;
mod crash;
mod nodes;
mod people;
mod schedules;
/// Redis servers of the tests' own, shared with the queue crate's tests.
#[path = "../../hourglass-queue/tests/redis/servers.rs"]
mod servers;
