//! The campaign's fault schedule, drawn from a seed: which swaps, and for
//! each the faults fired at drawn moments after it starts, on whom and for
//! how long. Pure: the same seed gives the same schedule, which is saved as
//! JSON beside the lab so `--replay FILE` runs exactly it again.
//!
//! A target is a role in the swap (its outgoing or incoming host, another
//! voter, a standby), named to a host only when the fault fires: the hosts
//! a swap takes depend on how the swaps before it ended.

use serde::{Deserialize, Serialize};

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL of the host's actuator (systemd starts it again).
    KillActuator,
    /// SIGKILL of the controller driving the swap (`fleet-role swap`);
    /// `run`'s leader takes the swap up once its Lease lapses.
    KillSwapController,
    /// SIGKILL of the leading `fleet-role run`, started again after the hold.
    KillLeadingRun,
    /// SIGKILL of the host's k3s unit (systemd starts it again).
    KillK3s,
    /// A clean power-off, booted again after the hold.
    PowerOff,
    /// A reboot.
    Reboot,
    /// The power cut (every process killed at once), booted after the hold.
    HardReset,
    /// The host's cable pulled for the hold.
    Cut,
    /// The host's etcd stopped (SIGSTOP) for the hold.
    FreezeEtcd,
    /// The host's kube-apiserver stopped (SIGSTOP) for the hold: its API
    /// accepts connections and never answers.
    FreezeApi,
    /// The host's etcd peer port cut for the hold: its member cannot reach
    /// its peers nor they it, while its clients, its API server and the
    /// controller still reach the host.
    PeerCut,
    /// Every packet the host sends to one other voter dropped for the hold
    /// (one direction of one link; TCP then fails both ways on that link).
    OneWay,
    /// The voters split for the hold: the host (a voter) cut from every
    /// other voter, a minority of one against the majority; the standbys
    /// and the controller still reach both sides.
    Split,
    /// The API server the swap's controller goes through unreachable from
    /// the controller for the hold, while it serves every host and the
    /// other API servers answer.
    ApiCut,
    /// The host's actuator's wall clock off by the fault's offset for the
    /// hold (libfaketime, `chaos::clocks`): beyond `skew_margin_secs`, so
    /// it must refuse what needs the Lease until its clock is back.
    HostClock,
    /// The controllers' wall clock (`fleet-role swap` and both `run`
    /// instances) off by the fault's offset for the hold: their writes
    /// must wait until it is back.
    ControllerClock,
}

impl FaultKind {
    /// Every kind, in the order the summary lists them.
    pub const ALL: [FaultKind; 16] = [
        FaultKind::KillActuator,
        FaultKind::KillSwapController,
        FaultKind::KillLeadingRun,
        FaultKind::KillK3s,
        FaultKind::PowerOff,
        FaultKind::Reboot,
        FaultKind::HardReset,
        FaultKind::Cut,
        FaultKind::FreezeEtcd,
        FaultKind::FreezeApi,
        FaultKind::PeerCut,
        FaultKind::OneWay,
        FaultKind::Split,
        FaultKind::ApiCut,
        FaultKind::HostClock,
        FaultKind::ControllerClock,
    ];

    /// Its name, as in the schedule's JSON and the summary.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillActuator => "kill-actuator",
            FaultKind::KillSwapController => "kill-swap-controller",
            FaultKind::KillLeadingRun => "kill-leading-run",
            FaultKind::KillK3s => "kill-k3s",
            FaultKind::PowerOff => "power-off",
            FaultKind::Reboot => "reboot",
            FaultKind::HardReset => "hard-reset",
            FaultKind::Cut => "cut",
            FaultKind::FreezeEtcd => "freeze-etcd",
            FaultKind::FreezeApi => "freeze-api",
            FaultKind::PeerCut => "peer-cut",
            FaultKind::OneWay => "one-way",
            FaultKind::Split => "split",
            FaultKind::ApiCut => "api-cut",
            FaultKind::HostClock => "host-clock",
            FaultKind::ControllerClock => "controller-clock",
        }
    }

    /// Whether it acts on a host (the others act on a controller).
    pub fn on_host(self) -> bool {
        !matches!(
            self,
            FaultKind::KillSwapController | FaultKind::KillLeadingRun | FaultKind::ControllerClock
        )
    }

    /// Whether it lasts its hold (a power-off, a reset, a cut, a freeze, a
    /// killed `run` kept down); a kill of a unit or a reboot is over once
    /// done.
    pub fn lasts(self) -> bool {
        matches!(
            self,
            FaultKind::KillLeadingRun
                | FaultKind::PowerOff
                | FaultKind::HardReset
                | FaultKind::Cut
                | FaultKind::FreezeEtcd
                | FaultKind::FreezeApi
                | FaultKind::PeerCut
                | FaultKind::OneWay
                | FaultKind::Split
                | FaultKind::ApiCut
                | FaultKind::HostClock
                | FaultKind::ControllerClock
        )
    }

    /// Whether it sets a clock off (libfaketime, `chaos::clocks`).
    pub fn on_clock(self) -> bool {
        matches!(self, FaultKind::HostClock | FaultKind::ControllerClock)
    }

    /// Whether it is a network fault (a packet filter in the host's
    /// namespace, `labrig::filter`).
    pub fn on_network(self) -> bool {
        matches!(
            self,
            FaultKind::PeerCut | FaultKind::OneWay | FaultKind::Split | FaultKind::ApiCut
        )
    }

    /// Whether it takes the host's etcd member out of the quorum while it
    /// lasts: such faults are the operator's budget, at most one at a time
    /// on the members (`Budget`). A link dropped one way counts: with a
    /// second member down the two ends of that link are no quorum.
    pub fn takes_member_down(self) -> bool {
        matches!(
            self,
            FaultKind::KillK3s
                | FaultKind::PowerOff
                | FaultKind::Reboot
                | FaultKind::HardReset
                | FaultKind::Cut
                | FaultKind::FreezeEtcd
                | FaultKind::PeerCut
                | FaultKind::OneWay
                | FaultKind::Split
        )
    }
}

/// Whom a fault acts on, named when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// The swap's outgoing voter.
    Outgoing,
    /// The swap's incoming standby.
    Incoming,
    /// Another voter, the `n`-th (modulo) of them by name.
    OtherVoter(u8),
    /// A standby outside the swap, the `n`-th (modulo) by name.
    Standby(u8),
}

/// One fault of a swap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// Milliseconds after the swap started.
    pub after_ms: u64,
    /// What it does.
    pub kind: FaultKind,
    /// On whom (ignored by the controller kinds).
    pub target: Target,
    /// How long it lasts, in milliseconds (a kill's hold is how long the
    /// killed `run` stays down; systemd restarts a killed unit itself).
    pub hold_ms: u64,
    /// How far a clock fault sets the clock off, in seconds (ahead when
    /// positive); 0 for the other kinds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset_secs: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One planned swap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Swap {
    /// Picks the outgoing voter and the incoming standby among those of
    /// the moment (`pick_pair`).
    pub pick: u64,
    /// Its faults, by time.
    pub faults: Vec<Fault>,
}

/// A whole campaign's schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The swaps, in order.
    pub swaps: Vec<Swap>,
}

/// The latest a fault fires after its swap starts: an undisturbed swap
/// in the lab takes about 40 s, so most faults land mid-step.
pub const LATEST_FAULT: u64 = 45_000;
/// The shortest and longest hold.
pub const HOLD: (u64, u64) = (3_000, 40_000);
/// How far a clock fault sets a clock off, in seconds, either way: past
/// the campaign's `skew_margin_secs` (5, the default) from twice it to
/// three times the swap's Lease (20 s), so a Lease that lapsed is still
/// valid by a clock that runs behind.
pub const CLOCK_OFFSET: (u64, u64) = (10, 60);

/// A small deterministic generator (splitmix64): the schedule must be
/// the same from the same seed on every machine and every build.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn within(&mut self, (lo, hi): (u64, u64)) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

impl Schedule {
    /// Draws `swaps` swaps carrying `faults` faults in all (spread as
    /// evenly as they go: the first swaps take one more).
    pub fn draw(seed: u64, swaps: usize, faults: usize) -> Schedule {
        let mut rng = Rng(seed);
        let swaps = (0..swaps)
            .map(|i| {
                let n = faults / swaps.max(1) + usize::from(i < faults % swaps.max(1));
                let mut fs: Vec<Fault> = (0..n).map(|_| draw_fault(&mut rng)).collect();
                fs.sort_by_key(|f| f.after_ms);
                Swap {
                    pick: rng.next(),
                    faults: fs,
                }
            })
            .collect();
        Schedule { seed, swaps }
    }

    /// How many faults in all.
    pub fn faults(&self) -> usize {
        self.swaps.iter().map(|s| s.faults.len()).sum()
    }
}

fn draw_fault(rng: &mut Rng) -> Fault {
    let kind = FaultKind::ALL[rng.below(FaultKind::ALL.len() as u64) as usize];
    // Half of the host faults hit the swap's own hosts.
    let target = match rng.below(6) {
        0 | 1 => Target::Outgoing,
        2 => Target::Incoming,
        3 | 4 => Target::OtherVoter(rng.below(4) as u8),
        _ => Target::Standby(rng.below(4) as u8),
    };
    let (after_ms, hold_ms) = (rng.below(LATEST_FAULT), rng.within(HOLD));
    let offset_secs = if kind.on_clock() {
        let secs = i64::try_from(rng.within(CLOCK_OFFSET)).unwrap_or(i64::MAX);
        if rng.below(2) == 0 { secs } else { -secs }
    } else {
        0
    };
    Fault {
        after_ms,
        kind,
        target,
        hold_ms,
        offset_secs,
    }
}

/// The outgoing voter and the incoming standby `pick` chooses among
/// `voters` and `standbys` (each sorted by name); none when either is
/// empty.
pub fn pick_pair(pick: u64, voters: &[String], standbys: &[String]) -> Option<(String, String)> {
    if voters.is_empty() || standbys.is_empty() {
        return None;
    }
    let out = &voters[(pick % voters.len() as u64) as usize];
    let incoming = &standbys[((pick / 7) % standbys.len() as u64) as usize];
    Some((out.clone(), incoming.clone()))
}

/// The host a host fault acts on, named from the swap's pair and the
/// fleet of the moment; none when the role has nobody (no other voter, no
/// standby outside the swap).
pub fn name_target(
    target: Target,
    (out, incoming): (&str, &str),
    voters: &[String],
    standbys: &[String],
) -> Option<String> {
    let nth = |among: Vec<&String>, n: u8| -> Option<String> {
        (!among.is_empty()).then(|| among[n as usize % among.len()].clone())
    };
    match target {
        Target::Outgoing => Some(out.to_string()),
        Target::Incoming => Some(incoming.to_string()),
        Target::OtherVoter(n) => nth(voters.iter().filter(|v| *v != out).collect(), n),
        Target::Standby(n) => nth(standbys.iter().filter(|s| *s != incoming).collect(), n),
    }
}

/// The operator's promise the schedule keeps: at most one fault at a time
/// takes an etcd member down (three voters lose quorum with two down).
/// A fault that would break it waits until the one holding the budget
/// ends (it is fired late, and counted as deferred).
#[derive(Debug, Default)]
pub struct Budget {
    held: bool,
}

impl Budget {
    /// Whether a fault of `kind` on a host (an etcd member or not) may
    /// fire now: `None` while it must wait; `Some(true)` when it fires and
    /// holds the budget until [`Budget::release`]; `Some(false)` when it
    /// fires without it.
    pub fn take(&mut self, kind: FaultKind, member: bool) -> Option<bool> {
        if !(kind.takes_member_down() && member) {
            return Some(false);
        }
        if self.held {
            return None;
        }
        self.held = true;
        Some(true)
    }

    /// The fault that held the budget ended.
    pub fn release(&mut self) {
        self.held = false;
    }

    /// Whether a member is down by the schedule now.
    pub fn member_down(&self) -> bool {
        self.held
    }
}

#[cfg(test)]
mod tests;
