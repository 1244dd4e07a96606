//! Tests of the crate as a whole: its layering.

mod layering;
