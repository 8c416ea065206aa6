//! The client against the real router, served on a free port, over an
//! embedded engine on a manual clock: every method, and the typed errors.
mod errors;
mod routes;
mod server;
