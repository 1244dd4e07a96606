//! Tests of `telemetry`.

use super::*;

mod logfile;

#[test]
fn sentinel_levels_map_to_filters() {
    assert_eq!(filter_for("debug"), "valkyrie=debug,info");
    assert_eq!(filter_for("notice"), "info");
    assert_eq!(filter_for("verbose"), "info");
    assert_eq!(filter_for("warning"), "warn");
    assert_eq!(filter_for("nothing"), "off");
    assert_eq!(filter_for("valkyrie=trace"), "valkyrie=trace");
}

/// A shared buffer the text layer writes into.
#[derive(Clone, Default)]
struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged(f: impl FnOnce()) -> String {
    use tracing_subscriber::prelude::*;
    let buf = Buf::default();
    let out = buf.clone();
    let layer = text_layer(move || out.clone()).with_ansi(false);
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buf.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn text_log_lines_cannot_be_forged() {
    // A group name, a host and a message part with line breaks and an
    // escape sequence, as a client or a monitored server could supply.
    let group = "a\nINFO valkyrie: forged line";
    let host = "h\r\n\u{1b}[2J";
    let out = logged(|| {
        tracing::info!(group = %group, host = host, n = 3, "event {}", "x\ny\u{2028}z");
        tracing::warn!(instance = ?"q\nr", "second");
    });
    assert_eq!(out.matches('\n').count(), 2, "{out:?}");
    assert!(!out.contains('\r') && !out.contains('\u{1b}') && !out.contains('\u{2028}'));
    let first = out.lines().next().unwrap();
    assert!(first.contains(r"event x\ny\u{2028}z"), "{first}");
    assert!(
        first.contains(r"group=a\nINFO valkyrie: forged line"),
        "{first}"
    );
    assert!(first.contains(r#"host="h\r\n\u{1b}[2J""#), "{first}");
    assert!(first.ends_with(" n=3"), "{first}");
    let second = out.lines().nth(1).unwrap();
    assert!(second.contains(r#"second instance="q\nr""#), "{second}");
}

#[test]
fn ordinary_fields_print_as_before() {
    let out = logged(|| tracing::info!(group = %"mymaster", epoch = 7u64, "sending"));
    assert!(
        out.ends_with(" sending group=mymaster epoch=7\n"),
        "{out:?}"
    );
}
