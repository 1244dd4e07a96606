//! Model checks (stateright) and property tests (proptest), one module a
//! subject: the core (`core_model`, `core_properties`), the write fence
//! (`fence`; under two governors during a rolling update, `governors`),
//! an adversary on the peer protocol, peers (`peers`) and, with the
//! `kubernetes` feature, the Lease elector (`lease`) and the reconciler's
//! rolling update and scale-down (`roll`, over the real `plan::plan`).
//! `search` is what the bounded checks share. They compute:
//! scripts/run-tests.py runs each module alone, before the others; the
//! `deep_*` checks are ignored, for `scripts/test --slow` (an optimised
//! build).

mod search;

mod adversary;
mod core_model;
mod core_properties;
mod fence;
mod governors;
mod lease;
mod peers;
mod roll;
