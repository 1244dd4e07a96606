//! Tests of `telemetry`.

use super::*;

#[test]
fn sentinel_levels_map_to_filters() {
    assert_eq!(filter_for("debug"), "valkyrie=debug,info");
    assert_eq!(filter_for("notice"), "info");
    assert_eq!(filter_for("verbose"), "info");
    assert_eq!(filter_for("warning"), "warn");
    assert_eq!(filter_for("nothing"), "off");
    assert_eq!(filter_for("valkyrie=trace"), "valkyrie=trace");
}
