//! Tests of the TLS material and its reload (certificates made with rcgen).
