//! The writer's history and its check: each key is a register written by
//! one client only, in order, so what a read of it at the end may return
//! is known exactly. An acknowledged put is never lost (the value read is
//! not older than the last acknowledged one), and no value is read that
//! was never written (it is the last acknowledged put's, or a later put
//! whose outcome is unknown: failed or timed out, it may have been
//! applied).

use std::collections::BTreeMap;

/// What one client did to its keys, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Per key, the last value whose put was acknowledged.
    acked: BTreeMap<String, u64>,
    /// Per key, the values put after it whose outcome is unknown.
    unknown: BTreeMap<String, Vec<u64>>,
}

impl History {
    /// Records a put of `value` to `key` and whether it was acknowledged.
    pub fn put(&mut self, key: &str, value: u64, acknowledged: bool) {
        if acknowledged {
            self.acked.insert(key.to_string(), value);
            // Earlier puts of unknown outcome can no longer be read.
            self.unknown.remove(key);
        } else {
            self.unknown.entry(key.to_string()).or_default().push(value);
        }
    }

    /// Every key written.
    pub fn keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self.acked.keys().cloned().collect();
        k.extend(self.unknown.keys().cloned());
        k.sort();
        k.dedup();
        k
    }

    /// What a read at the end broke, given `read` (each key's value as
    /// read, `None` when unset): one line per broken key, empty when none.
    pub fn check(&self, read: &BTreeMap<String, Option<String>>) -> Vec<String> {
        let mut broken = Vec::new();
        for key in self.keys() {
            let acked = self.acked.get(&key).copied();
            let unknown = self.unknown.get(&key).map(Vec::as_slice).unwrap_or(&[]);
            let got = read.get(&key).cloned().flatten();
            let may = |v: u64| acked == Some(v) || unknown.contains(&v);
            match (got.as_deref().map(str::parse::<u64>), acked) {
                (None, None) => {}
                (None, Some(a)) => broken.push(format!("{key}: acknowledged {a}, read nothing")),
                (Some(Ok(v)), _) if may(v) => {}
                (Some(Ok(v)), Some(a)) if v < a => broken.push(format!(
                    "{key}: acknowledged {a}, read the older {v} (a write lost)"
                )),
                (Some(_), _) => broken.push(format!(
                    "{key}: read {:?}, which was never written last (acknowledged {acked:?}, unknown {unknown:?})",
                    got.unwrap_or_default()
                )),
            }
        }
        broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn the_last_acknowledged_value_or_a_later_unknown_one_is_all_a_read_may_return() {
        let mut h = History::default();
        h.put("a", 1, true);
        h.put("a", 2, true);
        h.put("a", 3, false);
        h.put("b", 4, false);
        for ok in [
            read(&[("a", Some("2")), ("b", None)]),
            read(&[("a", Some("3")), ("b", Some("4"))]),
        ] {
            assert!(h.check(&ok).is_empty(), "{ok:?}: {:?}", h.check(&ok));
        }
        let lost = h.check(&read(&[("a", Some("1"))]));
        assert!(lost[0].contains("a write lost"), "{lost:?}");
        let gone = h.check(&read(&[("a", None)]));
        assert!(gone[0].contains("read nothing"), "{gone:?}");
        let phantom = h.check(&read(&[("a", Some("9")), ("b", Some("5"))]));
        assert_eq!(phantom.len(), 2, "{phantom:?}");
        assert!(
            phantom.iter().all(|p| p.contains("never written last")),
            "{phantom:?}"
        );
    }

    #[test]
    fn an_unknown_put_before_an_acknowledged_one_may_not_be_read() {
        let mut h = History::default();
        h.put("a", 1, false);
        h.put("a", 2, true);
        assert_eq!(h.check(&read(&[("a", Some("1"))])).len(), 1);
    }
}
