//! Integration tests of the HTTP API, compiled into one binary.
mod api;
mod browser;
mod several_nodes;
