//! What an operator monitors fleet-role with: the alert rules in
//! `deploy/prometheus/` (valid to Prometheus, each alert firing on the
//! series that mean it and only on those: `promtool test rules`) and the
//! Grafana dashboard in `deploy/grafana/`, both over documented metrics
//! only (docs/reference.md, which other tests hold to the code).

use std::{collections::BTreeSet, fs, path::PathBuf};

fn top() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn prometheus_dir() -> PathBuf {
    top().join("deploy/prometheus")
}

/// The metrics docs/reference.md documents.
fn documented() -> BTreeSet<String> {
    metric_names(&fs::read_to_string(top().join("docs/reference.md")).unwrap())
}

/// The `fleet_role_*` names in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("fleet_role_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[tokio::test]
async fn the_alert_rules_are_valid_and_each_alert_fires_on_its_series_and_only_then() {
    let dir = prometheus_dir();
    let checked = testcp::promtool::run(&dir, &["check", "rules", "fleet-role.rules.yaml"]).await;
    assert!(checked.contains("SUCCESS: 11 rules found"), "{checked}");
    let tested =
        testcp::promtool::run(&dir, &["test", "rules", "fleet-role.rules.test.yaml"]).await;
    assert!(tested.contains("SUCCESS"), "{tested}");
    // Every alert is tested, firing at least once.
    let rules = fs::read_to_string(dir.join("fleet-role.rules.yaml")).unwrap();
    let tests = fs::read_to_string(dir.join("fleet-role.rules.test.yaml")).unwrap();
    for alert in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "{alert} never fires in the tests"
        );
    }
}

#[tokio::test]
async fn the_example_scrape_configuration_is_one_prometheus_accepts() {
    let checked = testcp::promtool::run(
        &prometheus_dir(),
        &["check", "config", "--syntax-only", "scrape.example.yaml"],
    )
    .await;
    assert!(checked.contains("SUCCESS"), "{checked}");
}

#[test]
fn the_alert_rules_read_only_metrics_the_reference_documents() {
    let rules = fs::read_to_string(prometheus_dir().join("fleet-role.rules.yaml")).unwrap();
    let documented = documented();
    let used = metric_names(&rules);
    assert!(used.len() >= 8, "{used:?}");
    let unknown: Vec<_> = used.difference(&documented).collect();
    assert!(unknown.is_empty(), "not in docs/reference.md: {unknown:?}");
}

#[test]
fn the_dashboard_charts_every_documented_metric_and_no_other_each_for_the_chosen_cluster() {
    let text = fs::read_to_string(top().join("deploy/grafana/fleet-role.dashboard.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut charted = BTreeSet::new();
    for p in panels {
        let targets = p["targets"].as_array().expect("each panel has queries");
        assert!(!targets.is_empty(), "{} has no query", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("a PromQL expr");
            charted.extend(metric_names(expr));
            // Several clusters into one Prometheus: every series is read
            // for the chosen cluster only, and an actuator's for the
            // chosen hosts.
            for name in metric_names(expr) {
                let selector = format!("{name}{{cluster=~\"$cluster\"");
                assert!(expr.contains(&selector), "{}: {expr}", p["title"]);
                if name.starts_with("fleet_role_actuator_") {
                    assert!(
                        expr.contains(&format!("{selector},instance=~\"$host\"")),
                        "{}: {expr}",
                        p["title"]
                    );
                }
            }
        }
    }
    // A histogram is documented by its family and charted by its buckets.
    let charted: BTreeSet<String> = charted
        .into_iter()
        .map(|m| m.trim_end_matches("_bucket").to_string())
        .collect();
    assert_eq!(charted, documented());
}

/// The anchor GitHub and most renderers give a Markdown heading: lower
/// case, spaces as `-`, anything but letters, digits, `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of docs/recovery.md's headings.
fn recovery_anchors() -> BTreeSet<String> {
    fs::read_to_string(top().join("docs/recovery.md"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
        .map(anchor)
        .collect()
}

/// Each alert's name with its `runbook_url`, as the rules file has them.
fn runbook_urls() -> Vec<(String, Option<String>)> {
    let rules = fs::read_to_string(prometheus_dir().join("fleet-role.rules.yaml")).unwrap();
    let mut alerts: Vec<(String, Option<String>)> = Vec::new();
    for line in rules.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert: ") {
            alerts.push((name.to_string(), None));
        } else if let Some(url) = line.strip_prefix("runbook_url: ") {
            alerts.last_mut().expect("an alert before its url").1 = Some(url.to_string());
        }
    }
    alerts
}

#[test]
fn every_alert_links_its_runbook_entry_and_every_degraded_reason_and_alert_has_one() {
    assert_eq!(
        anchor("A host's actuator is silent"),
        "a-hosts-actuator-is-silent"
    );
    assert_eq!(
        anchor("By what `status` calls degraded"),
        "by-what-status-calls-degraded"
    );
    let anchors = recovery_anchors();
    let alerts = runbook_urls();
    assert!(alerts.len() >= 11, "{alerts:?}");
    let recovery = fs::read_to_string(top().join("docs/recovery.md")).unwrap();
    for (alert, url) in &alerts {
        let url = url
            .as_deref()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        let fragment = url
            .strip_prefix("https://fleet-role.example.org/docs/recovery.md#")
            .unwrap_or_else(|| {
                panic!("{alert}'s runbook_url {url} is not under the documented base")
            });
        assert!(
            anchors.contains(fragment),
            "{alert}'s runbook_url names #{fragment}, no heading of docs/recovery.md"
        );
        // The "By alert" table lists it, pointing at the same entry.
        assert!(
            recovery
                .lines()
                .any(|l| l.starts_with(&format!("| `{alert}` |"))
                    && l.contains(&format!("(#{fragment})"))),
            "docs/recovery.md's \"By alert\" table has no row for {alert} pointing at #{fragment}"
        );
    }
    // Every degraded reason has its row in the runbook's table.
    for reason in fleetdecide::DegradedReason::ALL {
        let name = reason.as_str();
        assert!(
            recovery
                .lines()
                .any(|l| l.starts_with(&format!("| `{name}`"))),
            "docs/recovery.md's degraded table has no row for {name}"
        );
    }
}

#[test]
fn every_alert_keeps_the_clusters_of_one_prometheus_apart() {
    let text = fs::read_to_string(prometheus_dir().join("fleet-role.rules.yaml")).unwrap();
    let rules: serde_json::Value = serde_saphyr::from_str(&text).expect("valid YAML");
    let mut aggregations = 0;
    for rule in rules["groups"][0]["rules"].as_array().expect("rules") {
        let (alert, expr) = (&rule["alert"], rule["expr"].as_str().expect("an expr"));
        for (at, _) in expr.match_indices(" by (") {
            let rest = &expr[at + 5..];
            let kept = &rest[..rest.find(')').expect("a by clause's end")];
            assert!(
                kept.split(',').any(|l| l.trim() == "cluster"),
                "{alert}: {expr} adds up the clusters"
            );
            aggregations += 1;
        }
        for (at, _) in expr.match_indices("on(") {
            assert!(
                expr[at..].starts_with("on(cluster)"),
                "{alert}: {expr} joins across the clusters"
            );
        }
        assert!(
            !expr.contains("max(") && !expr.contains("min("),
            "{alert}: {expr} aggregates every cluster into one"
        );
    }
    assert!(aggregations >= 11, "{aggregations}");
}

#[test]
fn the_reference_documents_every_metric_the_actuator_serves_and_no_other() {
    let m = actuator::metrics::Metrics::new();
    // A sample in each family, or it is not shown at all.
    m.step_ended("promote", "done");
    m.step_took("promote", std::time::Duration::from_secs(3));
    m.write_refused("report", "Forbidden");
    m.clock_offset(protocol::clock_offset::ClockOffset {
        above_ms: 0,
        at_most_ms: 1000,
    });
    let served: BTreeSet<String> = m
        .render()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| match l.split_once(' ') {
            Some((name, "counter")) => format!("{name}_total"),
            Some((name, _)) => name.to_string(),
            None => l.to_string(),
        })
        .collect();
    assert_eq!(served.len(), 6, "{served:?}");
    let documented: BTreeSet<String> = documented()
        .into_iter()
        .filter(|m| m.starts_with("fleet_role_actuator_"))
        .collect();
    assert_eq!(documented, served, "docs/reference.md");
}
