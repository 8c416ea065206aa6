//! Integration tests of push delivery, one binary.
