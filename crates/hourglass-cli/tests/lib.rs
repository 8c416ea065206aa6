//! Integration tests of the `hourglass` binary, compiled into one binary.

mod beanstalk;
mod crash;
mod nodes;
mod people;
mod python_client;
mod schedules;
