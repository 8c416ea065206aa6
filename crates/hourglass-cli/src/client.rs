//! The typed client as the commands use it: one built from `--server` and
//! `--token`, and its errors with what the person at the command line can do
//! about them (the hints name this command's flags, which the client's own
//! messages never do).

use std::fmt;

use hourglass_client::{Client, Error, StatusCode};

use crate::ServerArgs;

/// A client of the server `server` names.
pub fn connect(server: &ServerArgs) -> Client {
    Client::new(server.server.clone(), server.token.clone())
}

/// A request's result with its error explained.
pub trait Explain<T> {
    /// The value, or the error with a hint for the person who typed the
    /// command to `client`.
    fn explain(self, client: &Client) -> anyhow::Result<T>;
}

impl<T> Explain<T> for Result<T, Error> {
    fn explain(self, client: &Client) -> anyhow::Result<T> {
        self.map_err(|error| {
            let hint = match &error {
                Error::Unreachable { .. } => Hint::Unreachable,
                Error::Api { status, .. } if *status == StatusCode::UNAUTHORIZED && !client.has_token() => {
                    Hint::NoToken
                }
                Error::Api { status, .. } if *status == StatusCode::UNAUTHORIZED => Hint::TokenRefused,
                _ => Hint::None,
            };
            anyhow::Error::new(Explained { error, hint })
        })
    }
}

/// What to do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    None,
    Unreachable,
    NoToken,
    TokenRefused,
}

/// The client's error and its hint: shown together, its causes after them.
#[derive(Debug)]
struct Explained {
    error: Error,
    hint: Hint,
}

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let error = &self.error;
        match self.hint {
            Hint::None => write!(f, "{error}"),
            Hint::Unreachable => {
                write!(f, "{error}: is `hourglass serve` running there? (--server or HOURGLASS_SERVER names another)")
            }
            Hint::NoToken => write!(f, "{error} (the server needs a token: give --token or set HOURGLASS_TOKEN)"),
            Hint::TokenRefused => write!(f, "{error} (the server refused this token)"),
        }
    }
}

impl std::error::Error for Explained {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The client's error is shown in this one's message: its causes follow.
        std::error::Error::source(&self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: StatusCode) -> Result<(), Error> {
        Err(Error::Api { status, code: "unauthorized".into(), message: "a bearer token is required".into() })
    }

    #[test]
    fn a_401_says_how_to_give_a_token_or_that_it_was_refused() {
        let anonymous = Client::new("http://127.0.0.1:1", None);
        let message = format!("{:#}", api(StatusCode::UNAUTHORIZED).explain(&anonymous).unwrap_err());
        assert_eq!(
            message,
            "401 unauthorized: a bearer token is required \
             (the server needs a token: give --token or set HOURGLASS_TOKEN)"
        );
        let with_token = Client::new("http://127.0.0.1:1", Some("wrong".into()));
        let message = format!("{:#}", api(StatusCode::UNAUTHORIZED).explain(&with_token).unwrap_err());
        assert!(message.ends_with("(the server refused this token)"), "{message}");
        let message = format!("{:#}", api(StatusCode::NOT_FOUND).explain(&with_token).unwrap_err());
        assert_eq!(message, "404 unauthorized: a bearer token is required", "no hint");
    }
}
