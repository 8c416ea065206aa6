//! Integration tests of push delivery, one binary: a real receiver on
//! 127.0.0.1, the client, the outbound rules and the delivery loop.

mod contract;
mod deliver;
mod outbound;
mod outcomes;
mod signature;
mod tls;
