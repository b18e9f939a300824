//! k3s's snapshot retention (`pkg/etcd/snapshot.go`), shared by both
//! modes of the stand-in.

/// Of the snapshot file `names`, those `k3s etcd-snapshot prune --name
/// PREFIX --snapshot-retention KEEP` removes: the files whose name starts
/// with `prefix`, ordered by the unix time after their last `-` (a
/// `.zip` suffix cut first), newest first; those past the first `keep`.
/// A `keep` below 1 removes nothing, as in k3s. A name whose time does
/// not parse counts as the oldest (k3s falls back to its mtime; the
/// stand-ins write no such files).
pub fn to_prune(names: &[String], prefix: &str, keep: usize) -> Vec<String> {
    if keep < 1 {
        return Vec::new();
    }
    let mut dated: Vec<(i64, &String)> = names
        .iter()
        .filter(|n| n.starts_with(prefix))
        .map(|n| {
            let base = n.strip_suffix(".zip").unwrap_or(n);
            let ts = base
                .rsplit_once('-')
                .and_then(|(_, t)| t.parse().ok())
                .unwrap_or(i64::MIN);
            (ts, n)
        })
        .collect();
    dated.sort_by(|a, b| b.cmp(a));
    dated
        .into_iter()
        .skip(keep)
        .map(|(_, n)| n.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_keeps_the_newest_by_the_time_in_the_name_among_the_prefix_only() {
        let names: Vec<String> = [
            "swap-a-n1-300",
            "swap-b-n1-100.zip",
            "swap-c-n1-200",
            "etcd-snapshot-n1-50",
            "swap-d-n1-400",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            to_prune(&names, "swap-", 2),
            vec!["swap-c-n1-200".to_string(), "swap-b-n1-100.zip".to_string()]
        );
        assert!(to_prune(&names, "swap-", 4).is_empty());
        assert!(to_prune(&names, "swap-", 0).is_empty(), "0 keeps all");
    }
}
