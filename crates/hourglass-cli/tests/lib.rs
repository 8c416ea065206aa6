//! Integration tests of the `hourglass` binary, compiled into one binary.

mod beanstalk;
mod crash;
mod people;
mod schedules;
