//! What a worker did: counts kept while it runs, reported when it stops.

use std::sync::atomic::{AtomicU64, Ordering};

/// Defines the report and its live counters from one list of fields.
macro_rules! counts {
    ($($(#[$doc:meta])* $field:ident,)+) => {
        /// What a worker did, from its start to its stop. Each claimed task
        /// ends in exactly one of `acked`, `nacked`, `lost_leases` and
        /// `abandoned` ([`settled`](WorkerReport::settled)).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct WorkerReport {
            $($(#[$doc])* pub $field: u64,)+
        }

        /// The counters, shared by the worker's tasks.
        #[derive(Debug, Default)]
        pub(crate) struct Counts {
            $(pub(crate) $field: AtomicU64,)+
        }

        impl Counts {
            /// The counts now.
            pub(crate) fn report(&self) -> WorkerReport {
                WorkerReport { $($field: self.$field.load(Ordering::Relaxed),)+ }
            }
        }
    };
}

counts! {
    /// Tasks claimed.
    claimed,
    /// Handlers that returned `Ok`.
    succeeded,
    /// Handlers that returned `Err` or panicked.
    failed,
    /// Of those, handlers that panicked.
    panicked,
    /// Tasks whose ack the server confirmed.
    acked,
    /// Tasks whose nack the server confirmed.
    nacked,
    /// Tasks whose ack or nack was refused (their lease had run out) or never
    /// got through: the server delivers them again.
    lost_leases,
    /// Tasks whose handler was still running at the shutdown deadline.
    abandoned,
    /// Requests tried again after a failure that may pass.
    retries,
}

impl Counts {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl WorkerReport {
    /// Whether every claimed task ended one way or another.
    pub fn settled(&self) -> bool {
        self.claimed == self.acked + self.nacked + self.lost_leases + self.abandoned
    }
}
