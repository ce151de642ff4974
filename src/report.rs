//! The end-of-run report (DESIGN §4): one text line, or one JSON object, on stderr —
//! built from the engine's record of what actually ran.

use std::fmt::Write as _;

use crate::engine::Record;
use crate::fdkind::FdKind;

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatsFormat {
    #[default]
    Text,
    Json,
}

/// How a run (or one sink, one direction) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Eof,
    Error(String),
    Signal,
}

impl Ending {
    pub fn word(&self) -> &str {
        match self {
            Ending::Eof => "eof",
            Ending::Error(_) => "error",
            Ending::Signal => "signal",
        }
    }
}

/// One endpoint as the report names it.
#[derive(Debug, Clone)]
pub struct Named {
    pub uri: String,
    pub kind: FdKind,
}

/// The report of a one-source, one-sink transfer.
#[derive(Debug, Clone)]
pub struct Report {
    pub command: &'static str,
    pub src: Named,
    pub dst: Named,
    pub record: Record,
    pub seconds: f64,
    pub ending: Ending,
}

impl Report {
    pub fn text(&self) -> String {
        format!(
            "zerocat: {} {} -> {} via {}",
            amount(self.record.bytes(), self.seconds),
            self.src.kind,
            self.dst.kind,
            route(&self.record)
        )
    }

    pub fn json(&self) -> String {
        let mut o = JsonObject::new();
        o.str("command", self.command)
            .num("bytes", self.record.bytes())
            .float("seconds", self.seconds)
            .raw("src", &named_json(&self.src))
            .raw("dst", &named_json(&self.dst));
        record_json(&mut o, &self.record);
        ending_json(&mut o, &self.ending);
        o.finish()
    }

    pub fn render(&self, format: StatsFormat) -> String {
        match format {
            StatsFormat::Text => self.text(),
            StatsFormat::Json => self.json(),
        }
    }
}

/// "1.00 GiB in 412 ms (2.43 GiB/s)"
pub fn amount(bytes: u64, seconds: f64) -> String {
    let mut s = format!("{} in {}", human_bytes(bytes), human_duration(seconds));
    if seconds > 0.0 {
        let _ = write!(s, " ({}/s)", human_bytes((bytes as f64 / seconds) as u64));
    }
    s
}

/// "copy_file_range -> userspace (EXDEV)": the paths in the order they ran, each
/// fallback's reason after the path it handed over to.
pub fn route(record: &Record) -> String {
    let mut s = String::new();
    for (i, (path, _)) in record.paths.iter().enumerate() {
        if i > 0 {
            s.push_str(" -> ");
        }
        s.push_str(path.name());
        if i > 0 {
            let previous = record.paths[i - 1].0;
            if let Some(f) = record.fallbacks.iter().find(|f| f.from == previous) {
                let _ = write!(s, " ({})", f.reason.short());
            }
        }
    }
    if let Some(f) = record.fallbacks.iter().find(|f| f.to.is_none()) {
        let _ = write!(s, " (refused: {})", f.reason.short());
    }
    s
}

/// 3 significant digits: "0.25 ms", "412 ms", "2.41 s", "41.2 s"; then "2 min 03 s",
/// "1 h 02 min".
pub fn human_duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    if seconds < 1.0 {
        let ms = seconds * 1000.0;
        return format!("{} ms", three_digits(ms));
    }
    if seconds < 60.0 {
        return format!("{} s", three_digits(seconds));
    }
    let whole = seconds.round() as u64;
    if whole < 3600 {
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        format!("{} h {:02} min", whole / 3600, whole / 60 % 60)
    }
}

/// 3 significant digits for values below 1000: "412", "41.2", "4.12", "0.41".
fn three_digits(value: f64) -> String {
    let digits = if value >= 99.95 {
        0
    } else if value >= 9.995 {
        1
    } else {
        2
    };
    format!("{value:.digits$}")
}

/// 3 significant digits with binary units: "512 B", "12.0 MiB", "1.00 GiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {}", UNITS[unit])
}

pub fn named_json(named: &Named) -> String {
    let mut o = JsonObject::new();
    o.str("uri", &named.uri).str("kind", named.kind.name());
    o.finish()
}

/// Adds `paths` and `fallbacks` of a record to an object.
pub fn record_json(o: &mut JsonObject, record: &Record) {
    let paths: Vec<String> = record
        .paths
        .iter()
        .map(|(path, bytes)| {
            let mut p = JsonObject::new();
            p.str("path", path.name()).num("bytes", *bytes);
            p.finish()
        })
        .collect();
    let fallbacks: Vec<String> = record
        .fallbacks
        .iter()
        .map(|f| {
            let mut p = JsonObject::new();
            p.str("from", f.from.name());
            match f.to {
                Some(to) => p.str("to", to.name()),
                None => p.raw("to", "null"),
            };
            p.str("errno", &f.reason.short())
                .str("reason", &f.reason.to_string());
            p.finish()
        })
        .collect();
    o.raw("paths", &json_array(&paths))
        .raw("fallbacks", &json_array(&fallbacks));
}

/// Adds `ended` (eof, error, signal) and `error` (its text, or null).
pub fn ending_json(o: &mut JsonObject, ending: &Ending) {
    o.str("ended", ending.word());
    match ending {
        Ending::Error(text) => o.str("error", text),
        _ => o.raw("error", "null"),
    };
}

/// A JSON object written field by field: the report needs no more than this.
#[derive(Debug, Default)]
pub struct JsonObject {
    body: String,
}

impl JsonObject {
    pub fn new() -> JsonObject {
        JsonObject::default()
    }

    pub fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        if !self.body.is_empty() {
            self.body.push(',');
        }
        self.body.push_str(&json_string(key));
        self.body.push(':');
        self.body.push_str(json);
        self
    }

    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.raw(key, &json_string(value))
    }

    pub fn num(&mut self, key: &str, value: u64) -> &mut Self {
        self.raw(key, &value.to_string())
    }

    pub fn float(&mut self, key: &str, value: f64) -> &mut Self {
        self.raw(key, &format!("{value:.6}"))
    }

    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.raw(key, if value { "true" } else { "false" })
    }

    pub fn finish(&self) -> String {
        format!("{{{}}}", self.body)
    }
}

pub fn json_array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Fallback, Path, Reason};
    use nix::errno::Errno;

    #[test]
    fn sizes_are_human() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(12 << 20), "12.0 MiB");
        assert_eq!(human_bytes(1 << 30), "1.00 GiB");
        assert_eq!(human_bytes(300 << 10), "300 KiB");
    }

    #[test]
    fn durations_are_human() {
        assert_eq!(human_duration(0.00025), "0.25 ms");
        assert_eq!(human_duration(0.412), "412 ms");
        assert_eq!(human_duration(0.0412), "41.2 ms");
        assert_eq!(human_duration(2.414), "2.41 s");
        assert_eq!(human_duration(41.24), "41.2 s");
        assert_eq!(human_duration(123.0), "2 min 03 s");
        assert_eq!(human_duration(3720.0), "1 h 02 min");
        assert_eq!(amount(1 << 30, 0.5), "1.00 GiB in 500 ms (2.00 GiB/s)");
    }

    #[test]
    fn route_names_each_fallback_after_the_path_it_handed_to() {
        let record = Record {
            paths: vec![(Path::CopyFileRange, 0), (Path::Userspace, 12)],
            fallbacks: vec![Fallback {
                from: Path::CopyFileRange,
                to: Some(Path::Userspace),
                reason: Reason::Errno(Errno::EXDEV),
            }],
        };
        assert_eq!(route(&record), "copy_file_range -> userspace (EXDEV)");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), r#""a\"b\\c\n\u0001""#);
    }
}
