pub mod contention;
pub mod e2e;
pub mod idle;
pub mod structures;
