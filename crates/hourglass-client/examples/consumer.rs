//! The README's Rust consumer (README.md shows this file below these lines,
//! and a test of hourglass-cli runs it against a server of its own).

use hourglass_client::{wire::ClaimedTask, Client, Worker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = std::env::var("HOURGLASS_SERVER").unwrap_or_else(|_| "http://127.0.0.1:7463".into());
    let worker = Worker::new(Client::new(server, None), ["orders"], |task: ClaimedTask| async move {
        let order: serde_json::Value = task.payload_json().map_err(|e| e.to_string())?;
        println!("{order}: closing it if unpaid"); // return Err(reason) to nack
        Ok::<_, String>(())
    });
    let report = worker.concurrency(16).run().await?; // until Ctrl-C or SIGTERM
    println!("{report:?}");
    Ok(())
}
