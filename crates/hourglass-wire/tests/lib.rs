//! Integration tests of the wire format, compiled into one binary.
mod answers;
mod requests;
