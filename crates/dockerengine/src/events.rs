//! Docker's own record of what happened to its containers: the event
//! stream, read over a closed span of time.

use serde::Deserialize;

/// One event of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened: `create`, `start`, `die`, `stop`, `kill`, `destroy`, …
    pub action: String,
    /// The container's id.
    pub id: String,
    /// The container's name, as the event's attributes give it.
    pub name: String,
    /// When, in nanoseconds since the epoch (the daemon's clock).
    pub time_nano: i64,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "Type", default)]
    kind: String,
    #[serde(rename = "Action", default)]
    action: String,
    #[serde(rename = "Actor", default)]
    actor: Actor,
    #[serde(rename = "timeNano", default)]
    time_nano: i64,
}

#[derive(Deserialize, Default)]
struct Actor {
    #[serde(rename = "ID", default)]
    id: String,
    #[serde(rename = "Attributes", default)]
    attributes: std::collections::BTreeMap<String, String>,
}

/// The container events in `body` (one JSON object after another, as the
/// daemon streams them), in its order; other events are left out.
pub(crate) fn parse(body: &[u8]) -> Result<Vec<Event>, String> {
    let mut out = vec![];
    for raw in serde_json::Deserializer::from_slice(body).into_iter::<Raw>() {
        let raw = raw.map_err(|e| e.to_string())?;
        if raw.kind != "container" {
            continue;
        }
        out.push(Event {
            action: raw.action,
            id: raw.actor.id,
            name: raw
                .actor
                .attributes
                .get("name")
                .cloned()
                .unwrap_or_default(),
            time_nano: raw.time_nano,
        });
    }
    Ok(out)
}

/// Whether two of the containers `among` ever ran together, by Docker's
/// own events: a start of one while another's last start has no die after
/// it. Containers not named (a one-off container of k3s's command) are left
/// out.
pub fn ran_together(events: &[Event], among: &[&str]) -> Option<String> {
    let mut running: Vec<&str> = vec![];
    for e in events.iter().filter(|e| among.contains(&e.name.as_str())) {
        match e.action.as_str() {
            "start" => {
                if let Some(other) = running.iter().find(|n| **n != e.name) {
                    return Some(format!("{} started while {other} ran", e.name));
                }
                running.push(&e.name);
            }
            "die" => running.retain(|n| *n != e.name),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_never_together_check_sees_a_start_while_the_other_container_runs_and_leaves_others_out()
    {
        let event = |name: &str, action: &str| Event {
            action: action.into(),
            id: String::new(),
            name: name.into(),
            time_nano: 0,
        };
        let among = ["a", "b"];
        let apart = [event("a", "start"), event("a", "die"), event("b", "start")];
        assert_eq!(ran_together(&apart, &among), None);
        let together = [event("a", "start"), event("b", "start"), event("a", "die")];
        assert_eq!(
            ran_together(&together, &among).as_deref(),
            Some("b started while a ran")
        );
        let one_off = [event("a", "start"), event("c", "start")];
        assert_eq!(ran_together(&one_off, &among), None);
    }

    #[test]
    fn the_stream_reads_as_container_events_in_order_and_leaves_the_rest_out() {
        let body = br#"{"Type":"container","Action":"start","Actor":{"ID":"a","Attributes":{"name":"k3s"}},"timeNano":1}
{"Type":"network","Action":"connect","Actor":{"ID":"n"},"timeNano":2}
{"Type":"container","Action":"die","Actor":{"ID":"a","Attributes":{"name":"k3s","exitCode":"0"}},"timeNano":3}"#;
        let e = parse(body).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].action.as_str(), e[0].name.as_str()), ("start", "k3s"));
        assert_eq!((e[1].action.as_str(), e[1].time_nano), ("die", 3));
    }

    #[test]
    fn a_stream_cut_in_the_middle_of_an_event_is_an_error() {
        assert!(parse(br#"{"Type":"container","Action":"st"#).is_err());
    }
}
