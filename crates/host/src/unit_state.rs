//! A unit's state as `systemctl show` reports it: the one picture both the
//! calls that change a unit and the waits for it read.

/// systemd's `ActiveState` of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveState {
    /// Started (for a `Type=notify` unit: its process has sent `READY=1`).
    Active,
    /// Reloading its configuration; its process runs.
    Reloading,
    /// Stopped.
    Inactive,
    /// Stopped after a failure.
    Failed,
    /// Starting: its `ExecCondition=`, its start until ready, or the wait
    /// of `Restart=` before the next try (`auto-restart`).
    Activating,
    /// Stopping.
    Deactivating,
    /// Being cleaned or otherwise maintained by systemd; not stopped.
    Maintenance,
    /// Refreshing its mounts; its process runs.
    Refreshing,
}

impl ActiveState {
    /// Parses systemd's word.
    pub fn parse(word: &str) -> Option<ActiveState> {
        Some(match word {
            "active" => ActiveState::Active,
            "reloading" => ActiveState::Reloading,
            "inactive" => ActiveState::Inactive,
            "failed" => ActiveState::Failed,
            "activating" => ActiveState::Activating,
            "deactivating" => ActiveState::Deactivating,
            "maintenance" => ActiveState::Maintenance,
            "refreshing" => ActiveState::Refreshing,
            _ => return None,
        })
    }

    /// systemd's word.
    pub fn as_str(self) -> &'static str {
        match self {
            ActiveState::Active => "active",
            ActiveState::Reloading => "reloading",
            ActiveState::Inactive => "inactive",
            ActiveState::Failed => "failed",
            ActiveState::Activating => "activating",
            ActiveState::Deactivating => "deactivating",
            ActiveState::Maintenance => "maintenance",
            ActiveState::Refreshing => "refreshing",
        }
    }
}

/// A unit's state as `systemctl show` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitState {
    /// `ActiveState`.
    pub active: ActiveState,
    /// `SubState` (`running`, `start`, `condition`, `auto-restart`, …).
    pub sub: String,
    /// `Result` of the last run (`success`, `exec-condition`, `exit-code`, …).
    pub result: String,
    /// `InactiveExitTimestampMonotonic`: when it last left `inactive` or
    /// `failed`. A start that has run changes it, so a queued start that has
    /// not run yet can be told from one that ran and ended.
    pub inactive_exit: u64,
}

impl UnitState {
    /// Parses `Key=value` lines; `ActiveState` is required and must be one of
    /// systemd's words (an unknown one is an error, never a guess).
    pub fn parse(text: &str) -> std::result::Result<UnitState, String> {
        let mut active = None;
        let mut sub = String::new();
        let mut result = String::new();
        let mut inactive_exit = 0;
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim();
            match k.trim() {
                "ActiveState" => {
                    active = Some(
                        ActiveState::parse(v)
                            // Quoted within a bound: the answer is systemd's
                            // (or a stand-in's), and an error is one line.
                            .ok_or_else(|| {
                                format!(
                                    "unknown ActiveState {:?}",
                                    protocol::text::one_line_within(v, 64)
                                )
                            })?,
                    )
                }
                "SubState" => sub = v.to_string(),
                "Result" => result = v.to_string(),
                "InactiveExitTimestampMonotonic" => inactive_exit = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        Ok(UnitState {
            active: active.ok_or("no ActiveState in its answer")?,
            sub,
            result,
            inactive_exit,
        })
    }

    /// Whether the unit is stopped: `inactive` or `failed`, nothing else.
    /// `activating` (a start, its condition, an auto-restart's wait) and
    /// `deactivating` count as running: k3s may be up, or about to be.
    pub fn is_stopped(&self) -> bool {
        matches!(self.active, ActiveState::Inactive | ActiveState::Failed)
    }
}

impl std::fmt::Display for UnitState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.sub.is_empty() {
            f.write_str(self.active.as_str())
        } else {
            write!(f, "{} ({})", self.active.as_str(), self.sub)
        }
    }
}
