//! Tests of `scripts`: the queue on a fake clock, the runner with real
//! `/bin/sh` scripts.

mod pending;
mod queue;
mod runner;
