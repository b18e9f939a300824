//! k3s's configuration: `config.yaml`, then `config.yaml.d/*.yaml|*.yml` in
//! name order, a later file winning. Only `key: value` lines are read: the
//! keys the lab uses are scalars.

use std::{collections::BTreeMap, fs, path::Path};

/// The merged configuration.
#[derive(Debug, Clone, Default)]
pub struct K3sConfig {
    values: BTreeMap<String, String>,
}

impl K3sConfig {
    /// Reads the host's config and drop-ins.
    pub fn read(root: &Path) -> anyhow::Result<K3sConfig> {
        let mut files = vec![root.join("etc/rancher/k3s/config.yaml")];
        if let Ok(entries) = fs::read_dir(root.join("etc/rancher/k3s/config.yaml.d")) {
            let mut more: Vec<_> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            more.sort();
            files.extend(more);
        }
        let mut values = BTreeMap::new();
        for f in files {
            let Ok(text) = fs::read_to_string(&f) else {
                continue;
            };
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('#') {
                    continue;
                }
                if let Some((k, v)) = line.split_once(':') {
                    let v = v.trim().trim_matches('"').to_string();
                    values.insert(k.trim().to_string(), v);
                }
            }
        }
        Ok(K3sConfig { values })
    }

    /// A value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A boolean flag (`true`).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_drop_in_wins() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("etc/rancher/k3s/config.yaml.d");
        fs::create_dir_all(&d).unwrap();
        fs::write(
            dir.path().join("etc/rancher/k3s/config.yaml"),
            "node-name: a\nserver: https://x:1\n",
        )
        .unwrap();
        fs::write(d.join("90-b.yaml"), "server: \"https://y:2\"\n").unwrap();
        fs::write(d.join("10-a.yaml"), "disable-apiserver: true\n").unwrap();
        fs::write(d.join("95-ignored.txt"), "node-name: z\n").unwrap();
        let c = K3sConfig::read(dir.path()).unwrap();
        assert_eq!(c.get("server"), Some("https://y:2"));
        assert_eq!(c.get("node-name"), Some("a"));
        assert!(c.flag("disable-apiserver"));
        assert!(!c.flag("cluster-init"));
    }
}
