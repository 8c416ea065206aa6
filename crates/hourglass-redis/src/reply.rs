//! A script's reply, read item by item; anything unexpected is a storage error.

use redis::Value;

use hourglass_queue::QueueError;

use crate::error::unexpected;

/// A script's reply, read as a list.
pub(crate) struct Reply(std::vec::IntoIter<Value>);

impl Reply {
    pub(crate) fn new(value: Value) -> Result<Reply, QueueError> {
        match value {
            Value::Array(items) => Ok(Reply(items.into_iter())),
            other => Err(unexpected(format!("unexpected reply {other:?}"))),
        }
    }

    pub(crate) fn next(&mut self) -> Option<Value> {
        self.0.next()
    }

    pub(crate) fn int(&mut self) -> Result<i64, QueueError> {
        match self.next() {
            Some(Value::Int(n)) => Ok(n),
            other => Err(unexpected(format!("expected a number, got {other:?}"))),
        }
    }

    pub(crate) fn u64(&mut self) -> Result<u64, QueueError> {
        let n = self.int()?;
        u64::try_from(n).map_err(|_| unexpected(format!("negative number {n}")))
    }

    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, QueueError> {
        match self.next() {
            Some(Value::BulkString(bytes)) => Ok(bytes),
            Some(Value::SimpleString(text)) => Ok(text.into_bytes()),
            other => Err(unexpected(format!("expected a string, got {other:?}"))),
        }
    }

    /// A task's payload: its bytes, as every backend keeps them.
    pub(crate) fn payload(&mut self) -> Result<hourglass_queue::Payload, QueueError> {
        self.bytes().map(Into::into)
    }

    pub(crate) fn text(&mut self) -> Result<String, QueueError> {
        String::from_utf8(self.bytes()?).map_err(|_| unexpected("a string not UTF-8"))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}
