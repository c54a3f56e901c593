//! An answer of Prometheus' HTTP API to an instant query (prometheus.io/docs/prometheus/latest/
//! querying/api/, "Instant queries"): `{"status": "success", "data": {"resultType": "vector",
//! "result": [{"metric": {...}, "value": [time, "value"]}, ...]}}`, or `{"status": "error",
//! "error": "..."}`.
//!
//! A fleet of 10,000 nodes is some 300,000 series: label names and values are borrowed from the
//! answer's bytes where no escape forces a copy, and a series' labels are a short sorted list,
//! not a map of their own.

use std::borrow::Cow;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Answer<'a> {
    #[serde(borrow)]
    status: Text<'a>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, borrow)]
    data: Option<Data<'a>>,
}

#[derive(Debug, Deserialize)]
struct Data<'a> {
    #[serde(rename = "resultType", borrow)]
    result_type: Text<'a>,
    #[serde(default, borrow)]
    result: Vec<Sample<'a>>,
}

/// One series of an instant vector: its labels, sorted by name, and `[time, "value"]`.
#[derive(Debug, Clone, Deserialize)]
pub struct Sample<'a> {
    #[serde(borrow, deserialize_with = "sorted_labels")]
    pub metric: Vec<(Text<'a>, Text<'a>)>,
    #[serde(borrow)]
    pub value: (f64, Text<'a>),
}

impl Sample<'_> {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.metric
            .binary_search_by(|(k, _)| (**k).cmp(name))
            .ok()
            .map(|i: usize| &*self.metric[i].1)
    }
}

/// A label set as Prometheus writes it, a JSON object, read into a list sorted by name
/// (Prometheus sorts them already; a hand-written answer may not). A name given twice keeps
/// the last value, as a map would.
fn sorted_labels<'de, D>(d: D) -> Result<Vec<(Text<'de>, Text<'de>)>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<(Text<'de>, Text<'de>)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of label names to values")
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(
            self,
            mut map: M,
        ) -> Result<Self::Value, M::Error> {
            let mut labels = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(pair) = map.next_entry::<Text<'de>, Text<'de>>()? {
                labels.push(pair);
            }
            // Stable: of a name given twice, the later stays last, and dedup keeps it.
            labels.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out: Vec<(Text<'de>, Text<'de>)> = Vec::with_capacity(labels.len());
            for pair in labels {
                match out.last_mut() {
                    Some(last) if last.0 == pair.0 => *last = pair,
                    _ => out.push(pair),
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(Visitor)
}

/// A JSON string borrowed from the answer, or copied when it held an escape. (serde's own
/// `Cow<str>` is always copied inside a map.)
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Text<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// The samples of an API answer, or the error it states.
pub fn parse_answer(body: &[u8]) -> Result<Vec<Sample<'_>>, String> {
    let answer: Answer<'_> =
        serde_json::from_slice(body).map_err(|e| format!("not a Prometheus API answer ({e})"))?;
    if &*answer.status != "success" {
        return Err(format!(
            "the server says: {}",
            answer.error.unwrap_or_else(|| answer.status.0.into_owned())
        ));
    }
    let data = answer.data.ok_or("an answer without data")?;
    if &*data.result_type != "vector" {
        return Err(format!(
            "a {} where a vector was asked for",
            &*data.result_type
        ));
    }
    Ok(data.result)
}
