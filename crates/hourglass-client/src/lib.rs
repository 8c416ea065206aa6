//! A typed async client of hourglass's HTTP API: one method a route, each
//! sending and answering the API's own types ([`wire`], the
//! `hourglass-wire` crate, which the server uses too), and errors as a typed
//! [`Error`] that carries the server's stable code.
//!
//! ```no_run
//! use hourglass_client::wire::{ClaimRequest, NewTask};
//! use hourglass_client::Client;
//!
//! # async fn demo() -> Result<(), hourglass_client::Error> {
//! let client = Client::new("http://127.0.0.1:7700", None);
//! let payload = serde_json::value::to_raw_value(&"hello").unwrap();
//! client.enqueue("greetings", &NewTask { delay_ms: Some(1_000), ..NewTask::new(payload) }).await?;
//!
//! let claim = ClaimRequest { max: Some(10), wait_ms: Some(5_000), ..ClaimRequest::default() };
//! for task in client.claim("greetings", &claim).await?.tasks {
//!     println!("{}: {:?}", task.id, task.payload_json::<String>());
//!     client.ack(task.id, task.lease).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Transport
//! HTTP/1.1 over [`reqwest`]. Without the `tls` feature it is built without
//! TLS: for a server on the same machine or a private network, or behind a
//! proxy that ends TLS, and an `https://` URL fails with
//! [`Error::Unreachable`]. With `tls`, `https://` works on rustls (ring, no
//! OpenSSL), trusting the well-known authorities and those given to
//! `ClientBuilder::root_certificates_pem` (a server started with
//! `--tls-cert`). Connections are kept and reused; clones of a [`Client`]
//! share them. No timeout is set unless told (a claim may wait up to a
//! minute): [`ClientBuilder::timeout`], or give [`Client::with_http`] a
//! `reqwest::Client` of your own.
//!
//! Queue names (which may hold `/`), keys and schedule names are
//! percent-encoded into their path segments.
#![deny(missing_docs)]

mod builder;
mod client;
mod deliveries;
mod error;
mod path;
mod queues;
mod schedules;
mod tasks;
pub mod worker;

pub use builder::ClientBuilder;
pub use client::{Client, Stored};
pub use error::Error;
pub use hourglass_wire as wire;
/// An HTTP status, as [`Error`] carries it.
pub use reqwest::StatusCode;
pub use worker::{Worker, WorkerError, WorkerOptions, WorkerReport};
