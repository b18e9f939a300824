//! The guard before every irreversible write of a swap: its gates, then the
//! pause, then the write. Written once so that no write can check the pause
//! before its gates (a paused swap must still say why it would be refused)
//! or forget the pause (an operator's pause holds before every write).

use super::step::paused;
use crate::action::Action;
use crate::gate::{Gate, all_pass, failures};
use crate::record::{StopKind, StopNote, SwapStep};
use crate::view::FleetView;
use fleetfacts::reasons::Reason;
use protocol::view::LeaseFacts;

/// The failed gates as one line, or `None` when every gate passes.
pub(super) fn shut(gates: &[Gate]) -> Option<String> {
    (!all_pass(gates)).then(|| failures(gates))
}

/// A swap refused before its first write: the gates shut, it stops
/// (nothing to undo).
pub(super) fn refused(failures: String) -> Action {
    Action::BeginStop {
        note: StopNote {
            kind: StopKind::Refused,
            reason: Reason::GatesShut { failures },
        },
    }
}

/// Gates, then pause, then write: `blocked` (what keeps the write from
/// going ahead, usually [`shut`]'s failures) leads to `on_blocked`; else a
/// paused fleet halts at `step`'s safe point; else the `write`.
pub(super) fn guarded<B>(
    v: &FleetView,
    l: &LeaseFacts,
    step: SwapStep,
    blocked: Option<B>,
    on_blocked: impl FnOnce(B) -> Action,
    write: impl FnOnce() -> Action,
) -> Action {
    if let Some(b) = blocked {
        return on_blocked(b);
    }
    if v.paused() {
        return paused(l, step);
    }
    write()
}
