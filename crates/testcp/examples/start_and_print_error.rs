//! Starts a control plane and prints why it could not; run by
//! `tests/missing_binary.rs` with `FLEET_ROLE_KUBE_APISERVER` naming a binary
//! that is not there (changing the environment of a running multi-threaded
//! test binary would be a data race, so it is a process of its own).

#[tokio::main]
async fn main() {
    match testcp::ControlPlane::start().await {
        Err(error) => println!("start failed: {error}"),
        Ok(_) => println!("started"),
    }
}
