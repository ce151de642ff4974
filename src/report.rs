//! The end-of-run report (DESIGN §4): one text line, or one JSON object, on stderr —
//! built from the engine's record of what actually ran.

use std::fmt::Write as _;

use crate::engine::Record;
use crate::sys::fdkind::FdKind;
use crate::units::amount;

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
    use crate::engine::{DataPath, Fallback, Reason};
    use nix::errno::Errno;

    #[test]
    fn route_names_each_fallback_after_the_path_it_handed_to() {
        let record = Record {
            paths: vec![(DataPath::CopyFileRange, 0), (DataPath::Userspace, 12)],
            fallbacks: vec![Fallback {
                from: DataPath::CopyFileRange,
                to: Some(DataPath::Userspace),
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
