//! Model checks (stateright) and property tests (proptest), one module a
//! subject: the core (`core_model`, `core_properties`), the write fence,
//! an adversary on the peer protocol, peers (`peers`) and the Lease
//! elector (`lease`, with the `kubernetes` feature). `search` is what
//! the bounded checks share. They compute: scripts/run-tests.py runs
//! each module alone, before the others; the `deep_*` checks are
//! ignored, for `scripts/test --slow` (an optimised build).

mod search;

mod adversary;
mod core_model;
mod core_properties;
mod fence;
mod lease;
mod peers;
